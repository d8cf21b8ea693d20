package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/klique-ai/klique/internal/identity"
)

// The dashboard's single sign-on: GET /api/v1/auth/sso tells the page where
// the identity provider signs people in, and POST /api/v1/auth/sso/token
// turns the code the provider sent the person back with into an access
// token. The code is exchanged here, not in the browser, so the provider
// need not allow the dashboard's origin (CORS); the browser keeps the PKCE
// verifier, so a code taken from the address bar is useless alone.

// sso returns the identity provider's verifier, or answers 404 and returns
// nil when no single sign-on is configured.
func (h *Handler) sso(w http.ResponseWriter, r *http.Request) *identity.OIDCVerifier {
	v := h.d.Auth.OIDC()
	if v == nil {
		writeError(w, r, http.StatusNotFound, "NOT_FOUND", "single sign-on is not configured on this server (KLIQUE_OIDC_ISSUER and the rest): sign in with an API key")
	}
	return v
}

// ssoConfig is what the sign-in page needs to send a person to the
// provider.
type ssoConfig struct {
	AuthorizationEndpoint string `json:"authorization_endpoint"`
	ClientID              string `json:"client_id"`
	Scope                 string `json:"scope"`
}

func (h *Handler) ssoConfig(w http.ResponseWriter, r *http.Request) {
	v := h.sso(w, r)
	if v == nil {
		return
	}
	eps, err := v.Endpoints(r.Context())
	if err != nil {
		h.log.WarnContext(r.Context(), "single sign-on: discovery", "err", err)
		writeError(w, r, http.StatusServiceUnavailable, "UNAVAILABLE", "the identity provider's discovery document could not be read; try again, or sign in with an API key")
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, ssoConfig{AuthorizationEndpoint: eps.Authorization, ClientID: v.Config().Audience, Scope: "openid profile email"})
}

// ssoTokenRequest is the code the provider sent the person back with.
type ssoTokenRequest struct {
	Code         string `json:"code"`
	CodeVerifier string `json:"code_verifier"`
	RedirectURI  string `json:"redirect_uri"`
}

func (h *Handler) ssoToken(w http.ResponseWriter, r *http.Request) {
	v := h.sso(w, r)
	if v == nil {
		return
	}
	var in ssoTokenRequest
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeError(w, r, http.StatusBadRequest, "BAD_USER_INPUT", `send {"code", "code_verifier", "redirect_uri"} as JSON`)
		return
	}
	if u, err := url.Parse(in.RedirectURI); in.Code == "" || len(in.CodeVerifier) < 43 || len(in.CodeVerifier) > 128 ||
		err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		writeError(w, r, http.StatusBadRequest, "BAD_USER_INPUT",
			"code, code_verifier (43 to 128 characters, RFC 7636) and redirect_uri (the http(s) address the provider sent you back to) are all needed")
		return
	}
	ctx := identity.WithChannel(r.Context(), identity.ChannelAPI)
	idToken, err := v.ExchangeCode(ctx, in.Code, in.CodeVerifier, in.RedirectURI)
	if err == nil {
		var p *identity.Principal
		if p, err = h.d.Auth.Authenticate(ctx, idToken); err == nil {
			ctx = identity.WithPrincipal(ctx, p)
		}
	}
	switch {
	case errors.Is(err, identity.ErrUnauthenticated):
		h.metrics.authFailures.WithLabelValues("sso").Inc()
		writeError(w, r, http.StatusUnauthorized, "UNAUTHENTICATED", err.Error())
		return
	case err != nil:
		h.log.ErrorContext(ctx, "single sign-on: exchange the code", "err", err, "request_id", identity.RequestIDFrom(ctx))
		writeError(w, r, http.StatusBadGateway, "UNAVAILABLE", "the identity provider could not be reached to finish the sign-in; try again")
		return
	}
	tok, exp, err := h.d.Platform.Access.IssueToken(ctx)
	if err != nil {
		writePlatformError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, tokenResponse{AccessToken: tok, TokenType: "Bearer", ExpiresIn: int64(time.Until(exp).Seconds()), ExpiresAt: exp.UTC()})
}
