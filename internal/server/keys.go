package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/klique-ai/klique/internal/config"
	"github.com/klique-ai/klique/internal/identity"
)

// RotateSigningKey adds a new token signing key to the store of cfg (what
// `klique rotate-signing-key` does) and returns its key id. It needs the
// server's store and vault key: the key set is sealed by the vault. Running
// replicas sign with the new key within a minute; tokens signed with the
// older keys keep verifying until they expire, and keys none of whose
// tokens can still be alive (older than KLIQUE_TOKEN_TTL plus a little)
// are dropped.
//
// dropOld drops the older keys at once (a key leaked): their tokens stop
// verifying within a minute and everyone signs in again.
func RotateSigningKey(ctx context.Context, cfg *config.Config, log *slog.Logger, dropOld bool) (string, error) {
	if cfg.VaultKey == "" {
		// Making a vault key here, as the server does on its first start,
		// would only make one that cannot open the key set.
		if _, err := os.Stat(cfg.VaultKeyPath()); errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("no vault key: set KLIQUE_VAULT_KEY, or --data-dir to the server's data directory (%s has no vault.key)", cfg.DataDir)
		}
	}
	v, err := openVault(cfg, log)
	if err != nil {
		return "", err
	}
	st, err := openStore(ctx, cfg)
	if err != nil {
		return "", err
	}
	defer st.Close()
	kid, err := identity.RotateSigningKey(ctx, st, v, cfg.TokenTTL, time.Now(), dropOld)
	if err != nil {
		return "", fmt.Errorf("rotate the token signing key: %w", err)
	}
	log.Info("rotated the token signing key", "kid", kid, "store", st.Driver(), "dropped_older_keys", dropOld)
	return kid, nil
}
