package estatecmd

import (
	"fmt"
	"io"
	"os"

	"github.com/klique-ai/klique/internal/cli"

	"github.com/spf13/cobra"
)

func newApplyCmd(c *cli.CLI) *cobra.Command {
	var file string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "apply -f estate.yaml",
		Short: "Create or update the estate a file describes",
		Long: `Create or update the GPU classes, pools, profiles, groups, resource policies,
compute resources and projects an estate file describes, all in one
transaction: everything or, on any problem, nothing. Applying the same file
again changes nothing and says so. Objects the file does not mention are left
as they are.`,
		Example: `  klique apply -f examples/estate.yaml
  klique apply -f estate.yaml --dry-run`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return cli.Usagef("give the estate file with -f FILE (- for standard input)")
			}
			var doc []byte
			var err error
			if file == "-" {
				doc, err = io.ReadAll(io.LimitReader(c.In, 16<<20))
			} else {
				doc, err = os.ReadFile(file)
			}
			if err != nil {
				return cli.Usagef("read %s: %v", file, err)
			}
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			var out struct {
				ApplyEstate struct {
					Changes  []struct{ Text string } `json:"changes"`
					Warnings []struct {
						Object, Message string
					} `json:"warnings"`
					DryRun  bool   `json:"dryRun"`
					Summary string `json:"summary"`
				} `json:"applyEstate"`
			}
			err = cl.Do(cmd.Context(), `mutation($doc: String!, $dry: Boolean) {
				applyEstate(document: $doc, dryRun: $dry) { changes { text } warnings { object message } dryRun summary } }`,
				map[string]any{"doc": string(doc), "dry": dryRun}, &out)
			if err != nil {
				return err
			}
			res := out.ApplyEstate
			if c.Output != "table" {
				return c.Print(res)
			}
			for _, ch := range res.Changes {
				fmt.Fprintln(c.Out, ch.Text)
			}
			for _, w := range res.Warnings {
				fmt.Fprintf(c.Err, "warning: %s: %s\n", w.Object, w.Message)
			}
			fmt.Fprintln(c.Out, res.Summary)
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "estate file (YAML), - for standard input")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "say what would change, and change nothing")
	return cmd
}

func newExportCmd(c *cli.CLI) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Write the current estate as an estate file",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := c.Client(cmd.Context())
			if err != nil {
				return err
			}
			var out struct{ ExportEstate string }
			if err := cl.Do(cmd.Context(), `{ exportEstate }`, nil, &out); err != nil {
				return err
			}
			if file == "" || file == "-" {
				_, err = io.WriteString(c.Out, out.ExportEstate)
				return err
			}
			return os.WriteFile(file, []byte(out.ExportEstate), 0o644)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "write to this file instead of standard output")
	return cmd
}
