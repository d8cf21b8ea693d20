package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestAnAccessTokenEndsWithWhatItWasIssuedFrom issues an access token from
// an API key, then revokes the key, disables its user or takes the user
// out of the group of the project the key is scoped to, and checks that
// the token is refused at once, with a 401 that says why, by every channel
// a token opens: a GraphQL query, an enqueue and a call to the gateway.
// Before, the token kept working until it expired (an hour by default).
func TestAnAccessTokenEndsWithWhatItWasIssuedFrom(t *testing.T) {
	t.Parallel()
	model := fakeModel(t)
	ts := startServer(t)
	applyEstate(t, ts, readExample(t, "estate.yaml"))
	applyEstate(t, ts, gatewayEstate(model.URL))

	token := func(t *testing.T, secret string) string {
		t.Helper()
		resp, body := ts.exchangeToken(t, "Bearer "+secret)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST /api/v1/auth/token = %d %s", resp.StatusCode, body)
		}
		var tr struct {
			AccessToken string `json:"access_token"`
		}
		if err := json.Unmarshal([]byte(body), &tr); err != nil || tr.AccessToken == "" {
			t.Fatalf("token response %s: %v", body, err)
		}
		return tr.AccessToken
	}
	enqueue := func(t *testing.T, cred string) *gqlResult {
		t.Helper()
		return ts.gql(t, gqlRequest{Credential: cred, Query: `mutation($in: EnqueueTaskInput!) { enqueueTask(input: $in) { id } }`,
			Vars: map[string]any{"in": map[string]any{"name": "after", "project": "fraud-models", "computeResource": "1 GPU",
				"command": []any{"true"}}}})
	}
	// works checks that the token opens all three channels.
	works := func(t *testing.T, tok string) {
		t.Helper()
		ts.mustGQL(t, tok, meQuery, nil)
		if res := enqueue(t, tok); len(res.Errors) != 0 {
			t.Fatalf("enqueue with the token: %s", res.Raw)
		}
		if code, body := gatewayCall(t, ts.url, tok, "fraud-models"); code != http.StatusOK {
			t.Fatalf("/v1 with the token: %d %s", code, body)
		}
	}
	// refused checks that every channel answers 401 with a message that
	// contains why.
	refused := func(t *testing.T, tok, why string) {
		t.Helper()
		for name, res := range map[string]*gqlResult{"query": ts.gql(t, gqlRequest{Credential: tok, Query: meQuery}), "enqueue": enqueue(t, tok)} {
			if res.Status != http.StatusUnauthorized || res.code() != "UNAUTHENTICATED" {
				t.Errorf("GraphQL %s with the token = %d %v, want 401 UNAUTHENTICATED: %s", name, res.Status, res.codes(), res.Raw)
			} else if !strings.Contains(res.message(), why) {
				t.Errorf("GraphQL %s: message %q does not say %q", name, res.message(), why)
			}
		}
		if code, body := gatewayCall(t, ts.url, tok, "fraud-models"); code != http.StatusUnauthorized || !strings.Contains(body, why) {
			t.Errorf("/v1 with the token = %d %s, want 401 saying %q", code, body, why)
		}
	}
	newUser := func(t *testing.T, name string) {
		t.Helper()
		ts.mustGQL(t, adminKey, `mutation($in: CreateUserInput!) { createUser(input: $in) { id } }`,
			map[string]any{"in": map[string]any{"name": name, "role": "MEMBER", "groups": []any{map[string]any{"group": "ml-research"}}}})
	}

	t.Run("revoking the key", func(t *testing.T) {
		newUser(t, "rev")
		secret, id := newKey(t, ts, "rev")
		tok := token(t, secret)
		works(t, tok)
		ts.mustGQL(t, adminKey, `mutation($id: ID!) { revokeAPIKey(id: $id) { revokedAt } }`, map[string]any{"id": id})
		refused(t, tok, "revoked")
	})
	t.Run("disabling the user", func(t *testing.T) {
		newUser(t, "dis")
		secret, _ := newKey(t, ts, "dis")
		tok := token(t, secret)
		works(t, tok)
		ts.mustGQL(t, adminKey, `mutation { updateUser(id: "dis", input: {disabled: true}) { disabled } }`, nil)
		refused(t, tok, "disabled")
	})
	t.Run("removing the membership a scoped key stands on", func(t *testing.T) {
		newUser(t, "mem")
		d := ts.mustGQL(t, adminKey, `mutation { createAPIKey(input: {user: "mem", project: "fraud-models"}) { secret } }`, nil)
		tok := token(t, str(d, "createAPIKey", "secret"))
		works(t, tok)
		ts.mustGQL(t, adminKey, `mutation { removeGroupMember(group: "ml-research", user: "mem") }`, nil)
		refused(t, tok, "project")
	})
	t.Run("refusals are not logged as server errors", func(t *testing.T) {
		noErrorLogs(t, ts)
	})
}
