package runenv

import (
	"slices"
	"testing"
)

func TestExpandArgsFillsDeclaredParametersOnly(t *testing.T) {
	args := []string{"python", "train.py", "--lr", "{lr}", "--name=run-{seed}-{lr}", `{"json": 1}`, "{unknown}"}
	got := ExpandArgs(args, map[string]string{"lr": "0.01", "seed": "7"})
	want := []string{"python", "train.py", "--lr", "0.01", "--name=run-7-0.01", `{"json": 1}`, "{unknown}"}
	if !slices.Equal(got, want) {
		t.Fatalf("ExpandArgs = %q, want %q", got, want)
	}
	if args[3] != "{lr}" {
		t.Fatal("ExpandArgs changed the recorded command")
	}
	if got := ExpandArgs(args, nil); &got[0] != &args[0] {
		t.Fatal("with no parameters the arguments were copied")
	}
}

func TestArgTemplatesNamesEachReferenceOnce(t *testing.T) {
	got := ArgTemplates([]string{"--lr", "{lr}", "--x={seed}-{lr}", "{}", "{ not}"})
	if !slices.Equal(got, []string{"lr", "seed"}) {
		t.Fatalf("ArgTemplates = %q", got)
	}
}
