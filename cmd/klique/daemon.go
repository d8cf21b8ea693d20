package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/pflag"

	"github.com/klique-ai/klique/internal/cli"
)

// logFlags are the logging flags of the daemons this binary runs (worker,
// autoscaler, hpc-submitter, router): --log-level and, where a daemon
// offers a choice, --log-format.
type logFlags struct{ level, format string }

// add registers --log-level, and --log-format when withFormat; without it
// the daemon logs text.
func (l *logFlags) add(f *pflag.FlagSet, withFormat bool) {
	f.StringVar(&l.level, "log-level", "info", "log level: debug, info, warn or error")
	l.format = "text"
	if withFormat {
		f.StringVar(&l.format, "log-format", "text", "log format: text or json")
	}
}

// logger is the daemon's logger, writing to w; a level or format it does
// not know is a usage error.
func (l logFlags) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.level)); err != nil {
		return nil, cli.Usagef("--log-level %q: use debug, info, warn or error", l.level)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch l.format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, cli.Usagef("--log-format %q: use text or json", l.format)
}

// optionError is the error a daemon's constructor returned, as a usage
// error when it is about a flag (it names the flag first: "--gpus ...").
func optionError(err error) error {
	if strings.HasPrefix(err.Error(), "--") {
		return cli.Usage(err)
	}
	return err
}

// runDaemon runs a daemon until ctx ends, which is how a daemon is stopped
// (SIGTERM, Ctrl-C) rather than a failure.
func runDaemon(ctx context.Context, name string, run func(context.Context) error) error {
	if err := run(ctx); err != nil && !errors.Is(err, ctx.Err()) {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
