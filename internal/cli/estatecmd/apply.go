package estatecmd

import (
	"fmt"
	"io"
	"os"

	"github.com/klique-ai/klique/internal/cli"
	"github.com/klique-ai/klique/internal/cli/gql"

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
			// As -o json has always printed it.
			var res struct {
				Changes  []struct{ Text string } `json:"changes"`
				Warnings []struct {
					Object, Message string
				} `json:"warnings"`
				DryRun  bool   `json:"dryRun"`
				Summary string `json:"summary"`
			}
			out, err := gql.ApplyEstate(cmd.Context(), cl, string(doc), &dryRun)
			if err != nil {
				return err
			}
			if err := cli.Recast(out.ApplyEstate, &res); err != nil {
				return err
			}
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
			out, err := gql.ExportEstate(cmd.Context(), cl)
			if err != nil {
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
