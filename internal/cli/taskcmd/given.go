package taskcmd

import (
	"time"

	"github.com/spf13/pflag"

	"github.com/klique-ai/klique/internal/cli"
	"github.com/klique-ai/klique/internal/cli/artifactcmd"
	"github.com/klique-ai/klique/internal/cli/gql"
)

// given is what 'klique enqueue' and 'klique run' both take besides the
// code they send: which group's compute resource, the task's environment,
// secrets' names, input artifacts and tags, and how long to wait for a
// placement. One set of flags, read one way, for both.
type given struct {
	group                      string
	env, secrets, inputs, tags []string
	wait                       time.Duration
}

func (g *given) flags(f *pflag.FlagSet) {
	f.StringVar(&g.group, "group", "", "which group's compute resource, when several of your groups have one of that name")
	f.StringArrayVar(&g.env, "env", nil, "environment variable NAME=VALUE (repeatable; never secrets)")
	f.StringArrayVar(&g.secrets, "secret", nil, "a vault secret to inject as an environment variable of the same name (repeatable)")
	f.StringArrayVar(&g.inputs, "input", nil, "an earlier run's artifact as an input, NAME=RUN/ARTIFACT: the task reads it at $KLIQUE_INPUT_<NAME> (repeatable)")
	f.StringArrayVar(&g.tags, "tag", nil, "a label of the task (repeatable); a schedule can start when a task of a project completes with a tag")
	f.DurationVar(&g.wait, "wait", 0, "wait up to this long for the engine to place the task (e.g. 30s), then say where it is")
}

// fill puts the flags given into an EnqueueTaskInput. It only reads the
// flags, so a command calls it before anything with an effect (such as
// klique run's --push): a malformed --env or --input changes nothing.
func (g *given) fill(c *cli.CLI, in *gql.EnqueueTaskInput) error {
	in.Group, in.Secrets, in.Tags = cli.Ptr(g.group), g.secrets, g.tags
	if err := artifactcmd.From(c).SetInputs(in, g.inputs); err != nil {
		return err
	}
	e, err := keyValues("env", g.env)
	in.Env = e
	return err
}
