package main

import (
	"github.com/spf13/cobra"

	"github.com/klique-ai/klique/internal/cli/artifactcmd"
)

// artifacts gives the artifact commands (internal/cli/artifactcmd) the
// binary's client and output.
func (c *cli) artifacts() *artifactcmd.CLI {
	return &artifactcmd.CLI{Client: c.client, Out: c.out, Err: c.err, Output: func() string { return c.output },
		Print: c.print, Table: c.table, Usage: usagef}
}

func newArtifactCmd(c *cli) *cobra.Command { return artifactcmd.New(c.artifacts()) }
