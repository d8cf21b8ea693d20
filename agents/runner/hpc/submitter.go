package hpc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/klique-ai/klique/agents/client"
	"github.com/klique-ai/klique/agents/worker"
	"github.com/klique-ai/klique/internal/agentapi"
)

// Config is the submitter's configuration file (--config), every field
// optional; a flag given on the command line wins.
//
//	scheduler: slurm                 # slurm, pbs or lsf
//	userMap: /etc/klique/users.yaml  # platform user → Linux account
//	klique: /shared/bin/klique       # the klique executable on compute nodes
//	jobServer: https://klique.corp   # the control plane as compute nodes reach it
//	asUser: [sudo, -n, -u, "{account}", --]
//	container: apptainer             # apptainer, singularity, pyxis or none
//	parameters: {time_limit: "04:00:00", partition: gpu}
//	template: /etc/klique/batch.tmpl # the default batch template (a file)
//	templates:                       # per compute resource (files)
//	  "8 GPUs": /etc/klique/8gpu.tmpl
type Config struct {
	Scheduler  string            `yaml:"scheduler"`
	UserMap    string            `yaml:"userMap"`
	Klique     string            `yaml:"klique"`
	JobServer  string            `yaml:"jobServer"`
	AsUser     []string          `yaml:"asUser"`
	Container  string            `yaml:"container"`
	Parameters map[string]string `yaml:"parameters"`
	Template   string            `yaml:"template"`
	Templates  map[string]string `yaml:"templates"`
}

// ReadConfig reads a submitter configuration file.
func ReadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	var c Config
	if err := yaml.UnmarshalWithOptions(b, &c, yaml.Strict()); err != nil {
		return nil, fmt.Errorf("--config %s: %w", path, err)
	}
	return &c, nil
}

// SubmitterOptions are what `klique hpc-submitter` is given.
type SubmitterOptions struct {
	Config
	// Server is the control plane's URL; Token the pool's worker
	// credential; Pool the pool it is expected to be for.
	Server, Token, Pool string
	// Slots is how many GPUs of the pool the submitter keeps submitted at
	// once (its share of the cluster).
	Slots int
	// Name names the submitter (default: the host name).
	Name    string
	WorkDir string
	Grace   time.Duration
	Version string
	Log     *slog.Logger
	// Tune adjusts the runner's and the worker's options last (tests).
	Tune       func(*Options)
	TuneWorker func(*worker.Config)
}

// NewSubmitter builds the HPC submitter: the worker loop (Placed: the
// scheduler places the work) with a batch Runner.
func NewSubmitter(ctx context.Context, o SubmitterOptions) (*worker.Worker, error) {
	s, ok := ByName(o.Scheduler)
	if !ok {
		return nil, fmt.Errorf("--scheduler %q: use slurm, pbs or lsf", o.Scheduler)
	}
	switch {
	case o.Server == "":
		return nil, errors.New("no control plane: give --server URL (or set KLIQUE_SERVER)")
	case o.Token == "":
		return nil, errors.New("no worker credential: give --token-file FILE (an admin creates one for the pool)")
	case o.UserMap == "":
		return nil, errors.New("--user-map FILE is required: it maps platform users to the Linux accounts their jobs run as")
	case o.Slots <= 0:
		return nil, errors.New("--gpus N: say how many GPUs of the cluster this submitter may keep submitted at once")
	}
	users, err := LoadUserMap(o.UserMap)
	if err != nil {
		return nil, fmt.Errorf("--user-map: %w", err)
	}
	if o.Klique == "" {
		if o.Klique, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("--klique: %w", err)
		}
	}
	if o.JobServer == "" {
		o.JobServer = o.Server
	}
	def := ""
	if o.Template != "" {
		if def, err = ReadTemplateFile(o.Template); err != nil {
			return nil, err
		}
	}
	byCR := map[string]string{}
	for cr, path := range o.Templates {
		if byCR[cr], err = ReadTemplateFile(path); err != nil {
			return nil, fmt.Errorf("template of compute resource %q: %w", cr, err)
		}
	}
	tpl, err := NewTemplates(s, def, byCR)
	if err != nil {
		return nil, err
	}
	if o.WorkDir == "" {
		o.WorkDir = "klique-hpc"
	}
	wd, err := filepath.Abs(o.WorkDir)
	if err != nil {
		return nil, err
	}
	// Job directories live under it: compute nodes and job accounts must
	// reach them (a shared filesystem).
	if err := os.MkdirAll(wd, 0o755); err != nil {
		return nil, fmt.Errorf("work directory: %w", err)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	cl := client.New(o.Server, o.Token)
	cl.UserAgent = "klique-hpc-submitter/" + o.Version
	cl.Log = o.Log
	ro := Options{Scheduler: s, Users: users, Server: o.JobServer, Klique: o.Klique, Templates: tpl, Params: o.Parameters,
		AsUser: o.AsUser, Container: o.Container, JobsFile: filepath.Join(wd, "hpc-jobs.json"),
		Credential: func(ctx context.Context, taskID string, attempt int) (string, error) {
			c, err := cl.TaskCredential(ctx, taskID, attempt)
			if err != nil {
				return "", err
			}
			return c.Token, nil
		}}
	if o.Tune != nil {
		o.Tune(&ro)
	}
	r, err := New(ro)
	if err != nil {
		return nil, err
	}
	gpus := make([]agentapi.GPU, o.Slots)
	for i := range gpus {
		gpus[i] = agentapi.GPU{Index: i}
	}
	if o.Name == "" {
		if o.Name, err = os.Hostname(); err != nil {
			return nil, err
		}
	}
	cfg := worker.Config{Client: cl, Runner: r, GPUs: gpus, Pool: o.Pool, Hostname: o.Name, Version: o.Version,
		Kind: strings.ToLower(o.Scheduler), WorkDir: wd, Grace: o.Grace, Log: o.Log, Placed: true,
		Labels: map[string]string{"scheduler": s.Name()}}
	if o.TuneWorker != nil {
		o.TuneWorker(&cfg)
	}
	return worker.New(cfg)
}
