package identity

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/store"
)

// The keys access tokens are signed with live in one store setting, so
// that every replica signs and verifies with the same keys and tokens
// survive restarts. The setting holds a small key set, sealed by the
// vault key: whoever reads the settings table (a backup, a replica of the
// database) must not be able to mint a platform admin's token.
//
// The newest key of the set signs; every key of the set verifies, so a
// rotation does not end the tokens signed before it. A key stops verifying
// (and is dropped at the next rotation) once every token it can have
// signed has expired: keyRetention after the next key was made.

// Sealer seals a secret for storage and opens it again; *vault.Vault is
// one. The context binds a ciphertext to where it is kept.
type Sealer interface {
	Seal(plaintext []byte, context string) ([]byte, error)
	Open(ciphertext []byte, context string) ([]byte, error)
}

// sealedPrefix starts a sealed key set in the setting. A value without it
// is a single seed in the clear, as versions before the key set stored it,
// and is sealed on the next start.
const sealedPrefix = "sealed:v1:"

// sealContext binds the sealed key set to its setting.
const sealContext = "klique/setting/" + SettingTokenSigningKey

// keyReloadInterval is how often a replica reads the key set again, to sign
// with the newest key and to stop verifying dropped ones; a token signed
// by a key the replica does not know
// makes it read the set at once (at most once per keyReloadGap).
const (
	keyReloadInterval = time.Minute
	keyReloadGap      = 5 * time.Second
)

// signingKey is one Ed25519 key of the set.
type signingKey struct {
	id      string
	created time.Time
	seed    []byte
	priv    ed25519.PrivateKey
	pub     ed25519.PublicKey
}

// storedKey is a signingKey as the sealed setting holds it.
type storedKey struct {
	ID      string    `json:"kid"`
	Seed    []byte    `json:"seed"`
	Created time.Time `json:"created"`
}

type storedKeySet struct {
	Keys []storedKey `json:"keys"`
}

// newSigningKey builds a key from a seed; its id is a short hash of the
// public key, stable across replicas and restarts.
func newSigningKey(seed []byte, created time.Time) (*signingKey, error) {
	if len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("identity: token signing key seed is %d bytes; want %d", len(seed), ed25519.SeedSize)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	pub := priv.Public().(ed25519.PublicKey)
	sum := sha256.Sum256(pub)
	return &signingKey{id: hex.EncodeToString(sum[:8]), created: created.UTC(), seed: append([]byte(nil), seed...), priv: priv, pub: pub}, nil
}

// randomSigningKey makes a new key.
func randomSigningKey(now time.Time) (*signingKey, error) {
	seed := make([]byte, ed25519.SeedSize)
	if _, err := rand.Read(seed); err != nil {
		return nil, fmt.Errorf("identity: generate token signing key: %w", err)
	}
	return newSigningKey(seed, now)
}

// keyRetention is how long a key keeps verifying after the next one was
// made: the longest a token may live, plus the time a replica may go on
// signing with it before it reads the new set, plus the clock leeway.
func keyRetention(maxLifetime time.Duration) time.Duration {
	return maxLifetime + keyReloadInterval + tokenLeeway
}

// liveKeys returns the keys of set (oldest first) that may still have
// signed an unexpired token at now: the newest, and every older one
// retired less than keyRetention ago.
func liveKeys(set []*signingKey, maxLifetime time.Duration, now time.Time) []*signingKey {
	out := make([]*signingKey, 0, len(set))
	for i, k := range set {
		if i == len(set)-1 || now.Before(set[i+1].created.Add(keyRetention(maxLifetime))) {
			out = append(out, k)
		}
	}
	return out
}

// sealKeySet turns a key set into the setting's value.
func sealKeySet(sealer Sealer, set []*signingKey) (string, error) {
	st := storedKeySet{Keys: make([]storedKey, 0, len(set))}
	for _, k := range set {
		st.Keys = append(st.Keys, storedKey{ID: k.id, Seed: k.seed, Created: k.created})
	}
	plain, err := json.Marshal(st)
	if err != nil {
		return "", fmt.Errorf("identity: encode token signing keys: %w", err)
	}
	sealed, err := sealer.Seal(plain, sealContext)
	if err != nil {
		return "", fmt.Errorf("identity: seal token signing keys: %w", err)
	}
	return sealedPrefix + base64.StdEncoding.EncodeToString(sealed), nil
}

// openKeySet reads the setting's value. clear reports a value stored in
// the clear by an older version, which the caller seals.
func openKeySet(sealer Sealer, value string, now time.Time) (set []*signingKey, clear bool, err error) {
	value = strings.TrimSpace(value)
	rest, sealed := strings.CutPrefix(value, sealedPrefix)
	if !sealed {
		seed, err := base64.StdEncoding.DecodeString(value)
		if err != nil || len(seed) != ed25519.SeedSize {
			return nil, false, fmt.Errorf("identity: setting %q holds neither a sealed key set nor a base64 Ed25519 seed of %d bytes", SettingTokenSigningKey, ed25519.SeedSize)
		}
		k, err := newSigningKey(seed, now)
		if err != nil {
			return nil, false, err
		}
		return []*signingKey{k}, true, nil
	}
	raw, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return nil, false, fmt.Errorf("identity: setting %q: the sealed key set is not base64", SettingTokenSigningKey)
	}
	plain, err := sealer.Open(raw, sealContext)
	if err != nil {
		return nil, false, fmt.Errorf("identity: setting %q does not open with this vault key: every replica needs the KLIQUE_VAULT_KEY the key set was sealed with", SettingTokenSigningKey)
	}
	var st storedKeySet
	if err := json.Unmarshal(plain, &st); err != nil || len(st.Keys) == 0 {
		return nil, false, fmt.Errorf("identity: setting %q: the sealed key set is not a list of keys", SettingTokenSigningKey)
	}
	for _, sk := range st.Keys {
		k, err := newSigningKey(sk.Seed, sk.Created)
		if err != nil {
			return nil, false, fmt.Errorf("identity: setting %q: %w", SettingTokenSigningKey, err)
		}
		set = append(set, k)
	}
	return set, false, nil
}

// loadKeySet reads the key set from the store, making it when there is
// none and sealing a key found in the clear. Replicas starting at once
// race through PutSettingIfAbsent and all end up with the set that won. A
// stored value that does not open is an error, not a reason to make a new
// key: silently replacing it would split replicas and log everyone out.
func loadKeySet(ctx context.Context, q store.Queries, sealer Sealer, now time.Time) ([]*signingKey, error) {
	if sealer == nil {
		return nil, errors.New("identity: the token signing keys are sealed by the vault, and no vault was given")
	}
	value, err := q.GetSetting(ctx, SettingTokenSigningKey)
	if errors.Is(err, store.ErrNotFound) {
		k, err := randomSigningKey(now)
		if err != nil {
			return nil, err
		}
		sealed, err := sealKeySet(sealer, []*signingKey{k})
		if err != nil {
			return nil, err
		}
		if value, err = q.PutSettingIfAbsent(ctx, SettingTokenSigningKey, sealed); err != nil {
			return nil, fmt.Errorf("identity: store token signing key: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("identity: read token signing key: %w", err)
	}
	set, clear, err := openKeySet(sealer, value, now)
	if err != nil {
		return nil, err
	}
	if clear {
		// The same seed, sealed: tokens signed before keep verifying.
		sealed, err := sealKeySet(sealer, set)
		if err != nil {
			return nil, err
		}
		if err := q.PutSetting(ctx, SettingTokenSigningKey, sealed); err != nil {
			return nil, fmt.Errorf("identity: seal the token signing key stored in the clear: %w", err)
		}
	}
	return set, nil
}

// RotateSigningKey adds a new signing key to the set in the store and
// drops the keys whose tokens have all expired (given maxLifetime, the
// longest a token may live: KLIQUE_TOKEN_TTL). Tokens signed with the
// older keys keep verifying until they expire; replicas sign with the new
// key within keyReloadInterval. It returns the new key's id. Run one
// rotation at a time: two at once may keep only one of the new keys,
// which is harmless but not what was asked.
//
// dropOld drops every older key at once, for a key that leaked: every
// token signed before stops verifying on each replica within
// keyReloadInterval, and everyone signs in again.
func RotateSigningKey(ctx context.Context, q store.Queries, sealer Sealer, maxLifetime time.Duration, now time.Time, dropOld bool) (string, error) {
	set, err := loadKeySet(ctx, q, sealer, now)
	if err != nil {
		return "", err
	}
	k, err := randomSigningKey(now)
	if err != nil {
		return "", err
	}
	set = liveKeys(append(set, k), maxLifetime, now)
	if dropOld {
		set = []*signingKey{k}
	}
	sealed, err := sealKeySet(sealer, set)
	if err != nil {
		return "", err
	}
	if err := q.PutSetting(ctx, SettingTokenSigningKey, sealed); err != nil {
		return "", fmt.Errorf("identity: store the rotated token signing keys: %w", err)
	}
	return k.id, nil
}
