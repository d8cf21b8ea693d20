package mcp_test

import (
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/docbudget/docbudgettest"
	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform/pipelines"
)

// The pipeline alias bomb of issue 39 through MCP run_pipeline, as a
// member: a definition of about 560 bytes nesting anchors 8 levels deep,
// 10 aliases a level, with the last alias as a step's command. It is
// refused at once by the definition's budget, with the limit in the
// message, and no run is written: the audit trail gets only the record of
// the refused call.
func TestRunPipelineRefusesAnAliasBomb(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, b *testBundle) {
		runs := func() int {
			rs, err := b.Svc.PipelineRuns(b.Admin, pipelines.RunFilter{}, model.Page{Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			return len(rs)
		}
		alice := b.client(t, "alice")
		runsBefore, auditBefore := runs(), len(b.AuditLog(t))
		start := time.Now()
		msg := refused(t, alice, "run_pipeline", map[string]any{"definition": docbudgettest.Pipeline(8, 10)})
		// Without the budget the call runs for minutes and takes gigabytes;
		// the bound is generous for a loaded test machine.
		if took := time.Since(start); took > 10*time.Second {
			t.Fatalf("the refusal took %v", took)
		}
		for _, w := range []string{"pipeline definition: ", "aliases expanded; the limit is 1,000: use fewer anchors and aliases", "split the pipeline"} {
			if !strings.Contains(msg, w) {
				t.Fatalf("message %q lacks %q", msg, w)
			}
		}
		// The one entry added is the record of the refused call, which
		// every refused tool call leaves.
		audit := b.AuditLog(t)
		if n := runs(); n != runsBefore || len(audit) != auditBefore+1 || audit[0].Action != "mcp.tool_called" || !strings.Contains(audit[0].Detail, "aliases expanded") {
			t.Fatalf("the refusal left %d runs (was %d), %d audit entries (was %d), the newest %+v", n, runsBefore, len(audit), auditBefore, audit[0])
		}
	})
}
