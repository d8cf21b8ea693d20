package appconf

import (
	_ "embed"
	"encoding/json"
	"sync"

	"github.com/klique-ai/klique/internal/model"
)

// builtinsJSON holds the entries shipped with the product; forms are
// written inline as JSON objects.
//
//go:embed builtins.json
var builtinsJSON []byte

type builtinEntry struct {
	model.App
	FormDoc json.RawMessage `json:"form"`
}

var builtins = sync.OnceValue(func() []*model.App {
	var raw []builtinEntry
	if err := json.Unmarshal(builtinsJSON, &raw); err != nil {
		panic("appconf: builtins.json: " + err.Error()) // a build defect, caught by the package's tests
	}
	out := make([]*model.App, 0, len(raw))
	for _, r := range raw {
		a := r.App
		a.Form = CanonicalForm(string(r.FormDoc))
		a.BuiltIn = true
		out = append(out, &a)
	}
	return out
})

// BuiltIns returns copies of the built-in entries, available to every
// tenant. A tenant's entry of the same name overrides one.
func BuiltIns() []*model.App {
	var out []*model.App
	for _, b := range builtins() {
		x := *b
		out = append(out, &x)
	}
	return out
}

// BuiltIn returns a copy of the built-in entry named name, or nil.
func BuiltIn(name string) *model.App {
	for _, b := range builtins() {
		if b.Name == name {
			x := *b
			return &x
		}
	}
	return nil
}
