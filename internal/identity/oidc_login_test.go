package identity

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Sign-in codes and tokens must not cross the network in the clear: a
// provider whose discovery (or whose endpoints) are plain http on a
// non-loopback host is refused before anything is sent.
func TestSignInAtTheProviderNeedsHTTPS(t *testing.T) {
	v, err := NewOIDCVerifier(OIDCConfig{Issuer: "http://idp.example.com", JWKSURL: "https://idp.example.com/jwks", Audience: "klique"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Endpoints(context.Background()); err == nil || !strings.Contains(err.Error(), "must use https") {
		t.Fatalf("discovery over http to another host: %v, want a refusal that asks for https", err)
	}

	// A loopback provider whose discovery names a plain-http endpoint
	// elsewhere.
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"authorization_endpoint": "http://idp.example.com/authorize", "token_endpoint": "https://idp.example.com/token"}`))
	}))
	defer idp.Close()
	v, err = NewOIDCVerifier(OIDCConfig{Issuer: idp.URL, JWKSURL: idp.URL + "/jwks", Audience: "klique"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Endpoints(context.Background()); err == nil || !strings.Contains(err.Error(), "authorization_endpoint") {
		t.Fatalf("an http authorization endpoint in discovery: %v, want a refusal naming it", err)
	}
}

// The provider's refusal of a code (RFC 6749 §5.2) is an authentication
// failure with its reason, not an outage.
func TestARefusedCodeSaysWhy(t *testing.T) {
	var idp *httptest.Server
	idp = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"error": "invalid_grant", "error_description": "Code not valid"}`))
			return
		}
		_, _ = w.Write([]byte(`{"authorization_endpoint": "` + idp.URL + `/authorize", "token_endpoint": "` + idp.URL + `/token"}`))
	}))
	defer idp.Close()
	v, err := NewOIDCVerifier(OIDCConfig{Issuer: idp.URL, JWKSURL: idp.URL + "/jwks", Audience: "klique"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = v.ExchangeCode(context.Background(), "c", strings.Repeat("v", 43), "http://127.0.0.1:8080/")
	if !errors.Is(err, ErrUnauthenticated) || !strings.Contains(err.Error(), "invalid_grant: Code not valid") {
		t.Fatalf("a refused code: %v, want ErrUnauthenticated with the provider's reason", err)
	}
}
