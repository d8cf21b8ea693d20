package hpc

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"text/template"
	"unicode"
)

// ScriptData is what a batch template sees.
type ScriptData struct {
	// TaskID, Name and Attempt are the task's; JobName is "klique-" and
	// the task's name, made safe for every scheduler.
	TaskID, Name, JobName string
	Attempt               int
	// Scheduler is slurm, pbs or lsf; Account the Linux account the job
	// runs as; ComputeResource the compute resource the task came from.
	Scheduler, Account, ComputeResource string
	// Nodes and GPUsPerNode are the task's size (whole GPUs).
	Nodes, GPUsPerNode int
	// Dir is the job's directory (shared with the login node): the job's
	// output, its description and its credential are in it.
	Dir string
	// Image is the task's container image, empty for none; Container is
	// the wrapper that runs the task's command in it (apptainer exec
	// --nv IMAGE, srun --container-image=IMAGE), already part of Command.
	Image, Container string
	// Command runs the task inside the job (klique task-run), shell-quoted:
	// it runs the task's command, sends its logs and metrics home and
	// reports its end with the task's own credential.
	Command string
	// Params are the task's parameters over the configured defaults.
	Params map[string]string
}

// Param returns a parameter, or "" when neither the task nor the defaults
// give it. A template puts it into a line of the batch script (a
// directive such as #SBATCH --partition=…), so a value with a line break
// or another control character is refused: it would start a line of its
// own, which the job runs as shell.
func (d ScriptData) Param(name string) (string, error) {
	v := d.Params[name]
	if strings.ContainsFunc(v, unicode.IsControl) {
		return "", fmt.Errorf("parameter %s holds a line break or another control character, which a line of the batch script cannot hold; give it a plain value", name)
	}
	return v, nil
}

// Templates are the batch templates of a submitter: one per compute
// resource, a default, and the scheduler's built-in one.
type Templates struct {
	byResource map[string]*template.Template
	def        *template.Template
}

// NewTemplates parses the templates: def (empty: the scheduler's built-in
// one) and byResource (compute resource name → template text).
func NewTemplates(s Scheduler, def string, byResource map[string]string) (*Templates, error) {
	if def == "" {
		def = s.DefaultTemplate()
	}
	t := &Templates{byResource: map[string]*template.Template{}}
	var err error
	if t.def, err = parseTemplate("default", def); err != nil {
		return nil, err
	}
	for name, text := range byResource {
		if t.byResource[name], err = parseTemplate(name, text); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func parseTemplate(name, text string) (*template.Template, error) {
	t, err := template.New(name).Option("missingkey=zero").Funcs(template.FuncMap{"quote": shellQuote}).Parse(text)
	if err != nil {
		return nil, fmt.Errorf("batch template %q: %w", name, err)
	}
	return t, nil
}

// ReadTemplateFile reads a template's text from a file.
func ReadTemplateFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("batch template: %w", err)
	}
	return string(b), nil
}

// Render writes the batch script of a task.
func (t *Templates) Render(d ScriptData) (string, error) {
	tpl := t.def
	if r, ok := t.byResource[d.ComputeResource]; ok {
		tpl = r
	}
	var b bytes.Buffer
	if err := tpl.Execute(&b, d); err != nil {
		return "", fmt.Errorf("batch template %q: %w", tpl.Name(), err)
	}
	return b.String(), nil
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

// jobName is "klique-" and the name, in letters, digits, '-', '_' and
// '.', at most 64 bytes.
func jobName(name string) string {
	s := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, name)
	s = "klique-" + s
	if len(s) > 64 {
		s = s[:64]
	}
	return s
}
