package shellarg

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/klique-ai/klique/internal/citest"
)

func TestScriptIndexFindsTheScriptAShellRuns(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want int
	}{
		{[]string{"sh", "-c", "echo hi"}, 2},
		{[]string{"/bin/sh", "-c", "echo hi", "arg0", "x"}, 2},
		{[]string{"bash", "-lc", "echo hi"}, 2},
		{[]string{"bash", "-e", "-o", "pipefail", "-c", "echo hi"}, 5},
		{[]string{"bash", "-euo", "pipefail", "-c", "echo hi"}, 4},
		{[]string{"bash", "--login", "-c", "echo hi"}, 3},
		{[]string{"bash", "--rcfile", "rc", "-c", "echo hi"}, 4},
		{[]string{"zsh", "-c", "--", "echo hi"}, 3},
		{[]string{"env", "A=1", "sh", "-c", "echo hi"}, 4},
		{[]string{"/usr/bin/env", "-u", "HOME", "bash", "-c", "echo hi"}, 5},
		{[]string{"busybox", "sh", "-c", "echo hi"}, 3},
		{[]string{"dash", "-xc", "echo hi"}, 2},
		// No script: a file, stdin, or no shell at all.
		{[]string{"sh", "run.sh", "-c"}, -1},
		{[]string{"bash", "-c"}, -1},
		{[]string{"bash", "+c", "x"}, -1},
		{[]string{"python", "-c", "print(1)"}, -1},
		{[]string{"echo", "sh", "-c", "x"}, -1},
		{nil, -1},
	} {
		if got := ScriptIndex(tc.argv); got != tc.want {
			t.Errorf("ScriptIndex(%q) = %d, want %d", tc.argv, got, tc.want)
		}
	}
}

// hostile are values that would run commands if a shell read them as
// text: each one, quoted, must reach the script as exactly itself.
func hostile(t *testing.T) (marker string, values []string) {
	marker = filepath.Join(t.TempDir(), "pwned")
	return marker, []string{
		"x; touch " + marker,
		"$(touch " + marker + ")",
		"`touch " + marker + "`",
		"x\ntouch " + marker,
		"it's; touch " + marker + " #'",
		`"; touch ` + marker + `; "`,
		"a b\tc", "", "'", "\\", "$HOME", "*", "-n",
	}
}

// TestQuotedValuesReachTheScriptAsThemselves runs each hostile value,
// quoted, through a real sh -c, as a pipeline step's script would, and
// checks that the script printed it back exactly and ran nothing.
func TestQuotedValuesReachTheScriptAsThemselves(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		citest.Missing(t, "no sh on this machine")
	}
	marker, values := hostile(t)
	for _, v := range values {
		script := "printf '%s' " + Quote(v)
		ok, err := Bare(script, [][2]int{{len("printf '%s' "), len(script)}})
		if err != nil || !ok[0] {
			t.Fatalf("Bare(%q) = %v, %v", script, ok, err)
		}
		out, err := exec.Command(sh, "-c", script).Output()
		if err != nil {
			t.Fatalf("sh -c %q: %v", script, err)
		}
		if string(out) != v {
			t.Errorf("sh printed %q for %q", out, v)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("the value %q ran a command", v)
		}
	}
}

func TestBareSaysWhereAQuotedValueStaysOneWord(t *testing.T) {
	const T = "{x}"
	for _, tc := range []struct {
		script string
		want   bool
	}{
		{"echo {x}", true},
		{"python train.py --lr={x} && echo done", true},
		{"X={x}; export Y={x}", true},
		{"cat > {x}", true},
		{"for f in a {x}; do echo $f; done", true},
		{"case $a in {x}) echo y;; esac", true},
		{"echo $(basename {x})", true},
		{"echo {x}{x}", true},
		{`echo "{x}"`, false},
		{"echo 'lr {x}'", false},
		{`echo "$(basename {x})"`, false},
		{"echo `basename {x}`", false},
		{"cat <<EOF\n{x}\nEOF", false},
		{"echo ${a:-{x}}", false},
		{"echo $(( {x} + 1 ))", false},
		{"echo ${x}", false},
		{"# {x}\necho hi", false},
		{"{x}() { :; }", false},
	} {
		var spans [][2]int
		for i := 0; ; {
			j := strings.Index(tc.script[i:], T)
			if j < 0 {
				break
			}
			spans = append(spans, [2]int{i + j, i + j + len(T)})
			i += j + len(T)
		}
		got, err := Bare(tc.script, spans)
		if err != nil {
			t.Errorf("Bare(%q): %v", tc.script, err)
			continue
		}
		want := make([]bool, len(spans))
		for i := range want {
			want[i] = tc.want
		}
		if tc.script == "echo ${x}" { // not a template: the parameter's name
			want = []bool{false}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Bare(%q) = %v, want %v", tc.script, got, want)
		}
	}
	if _, err := Bare("echo ( {x}", [][2]int{{7, 10}}); err == nil {
		t.Errorf("a script that does not parse gave no error")
	}
}
