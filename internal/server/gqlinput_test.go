package server_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// A variable that a custom scalar (StringMap, Map, Time) cannot read is
// the caller's mistake: it is answered BAD_USER_INPUT with what to change, and
// is not logged as the server's failure. (Found by FuzzGraphQLMutation:
// runPipeline with "params": "0" was answered INTERNAL "internal error",
// and logged at ERROR level.)
func TestABadScalarVariableIsTheCallersMistake(t *testing.T) {
	ts := startServer(t)
	for _, tc := range []struct {
		query, vars, says string
	}{
		{`mutation($in: RunPipelineInput!) { runPipeline(input: $in) { id } }`,
			`{"in":{"definition":"name: p","params":"0"}}`, `expected a json object of strings`},
		{`mutation($in: RunPipelineInput!) { runPipeline(input: $in) { id } }`,
			`{"in":{"definition":"name: p","params":{"lr":[1]}}}`, `value of "lr" must be a string`},
		{`mutation($in: LaunchAppInput!) { launchApp(input: $in) { id } }`,
			`{"in":{"app":"a","computeResource":"c","values":"x"}}`, `map`},
		{`query($s: Time) { llmRefusals(since: $s) { reason } }`,
			`{"s":"yesterday"}`, `time`},
	} {
		res := ts.gqlBody(t, adminKey, []byte(`{"query":`+mustJSON(t, tc.query)+`,"variables":`+tc.vars+`}`), nil)
		if res.Status >= 500 || res.code() != "BAD_USER_INPUT" || !strings.Contains(strings.ToLower(res.message()), tc.says) {
			t.Errorf("%s with %s: %d %s, want BAD_USER_INPUT saying %q", tc.query, tc.vars, res.Status, res.Raw, tc.says)
		}
		if errs := ts.logs.errors(); len(errs) > 0 {
			t.Errorf("%s with %s logged errors:\n%s", tc.query, tc.vars, strings.Join(errs, "\n"))
		}
	}
}

// mustJSON is v as JSON.
func mustJSON(t testing.TB, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
