package platform_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
)

// TestLaunchValuesAreOneArgumentNeverShell: a launch form's value is one
// argument of the instance's command, spaces and all; a catalogue entry
// that would put a value into a shell script unquoted is refused when it
// is put, and with {name|shell} the script the instance runs reads the
// value as exactly itself and runs nothing of it.
func TestLaunchValuesAreOneArgumentNeverShell(t *testing.T) {
	forEachStore(t, func(t *testing.T, b *testBundle) {
		b.ApplyExample(t)
		ps := b.people(t)
		marker := filepath.Join(t.TempDir(), "pwned-"+strconv.FormatInt(time.Now().UnixNano(), 36))
		value := "/srv/my notebooks; touch " + marker + " $(touch " + marker + ")"

		_, err := b.Svc.PutApp(b.Admin, echoApp())
		platformtest.Must(t, err)
		in, err := launch(ps.rita, b, "echo", "1 GPU", map[string]any{"dir": value})
		platformtest.Must(t, err)
		if want := []string{"python3", "-m", "http.server", "{port}", "--directory", value}; !slices.Equal(in.Task.Spec.Command, want) {
			t.Fatalf("command %q, want %q: the value split into arguments", in.Task.Spec.Command, want)
		}

		script := echoApp()
		script.Name, script.Run = "script", model.AppRun{Batch: "printf '%s' {dir}"}
		before := b.snapshot(t)
		_, err = b.Svc.PutApp(b.Admin, script)
		platformtest.WantError(t, err, platform.CodeInvalid, "run.batch is a shell script (an HPC job runs it with /bin/sh -c): {dir} would put a launch value into it as shell; write {dir|shell} to insert it quoted")
		script.Run.Batch = `printf '%s' "{dir|shell}"`
		_, err = b.Svc.PutApp(b.Admin, script)
		platformtest.WantError(t, err, platform.CodeInvalid, "{dir|shell} stands inside quotes")
		b.unchanged(t, before)

		script.Run.Batch = "printf '%s' {dir|shell}"
		_, err = b.Svc.PutApp(b.Admin, script)
		platformtest.Must(t, err)
		in, err = launch(ps.rita, b, "script", "1 GPU", map[string]any{"dir": value})
		platformtest.Must(t, err)
		cmd := in.Task.Spec.Command
		if len(cmd) != 3 || cmd[0] != "/bin/sh" || cmd[1] != "-c" || in.Task.Spec.App.Run.Batch != cmd[2] {
			t.Fatalf("command %q, batch %q", cmd, in.Task.Spec.App.Run.Batch)
		}
		out, err := exec.Command(cmd[0], cmd[1:]...).Output()
		if err != nil || string(out) != value {
			t.Fatalf("the instance's script printed %q (%v), want %q", out, err, value)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("a launch value ran as shell")
		}
	})
}
