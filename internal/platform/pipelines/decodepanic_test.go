package pipelines

import (
	"strings"
	"testing"
)

// The YAML decoder panics on a tag where a list belongs ("steps: !0" and
// nothing after it: found by FuzzGraphQLMutation through runPipeline, with
// a member's key). A definition comes from users: it is refused with what
// to check, and never takes the server down.
func TestADefinitionTheDecoderCannotReadIsRefused(t *testing.T) {
	for _, text := range []string{
		"name: p\nproject: fraud-models\nsteps:\n !0 #000\b0\b0",
		"name: p\nsteps:\n !0 #x\n",
		"name: p\nsteps: !0\n",
	} {
		def, err := ParseDefinition(text)
		if def != nil || err == nil || !strings.Contains(err.Error(), "read the pipeline definition") {
			t.Errorf("%q: %+v, %v; want a refusal", text, def, err)
		}
	}
}
