package server

import (
	"encoding/csv"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/klique-ai/klique/internal/platform"
)

// usageCSV exports the usage ledger as CSV for chargeback and external
// billing: GET /api/v1/usage.csv?from=RFC3339&to=RFC3339&by=group,pool
// with optional user, project and group filters; GPU-hours and the
// gateway's calls and tokens side by side. It is the same query as
// GraphQL's usage, through the same platform operation.
func (h *Handler) usageCSV(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	from, err := time.Parse(time.RFC3339, v.Get("from"))
	if err != nil {
		writeError(w, r, http.StatusBadRequest, string(platform.CodeInvalid), "from must be an RFC 3339 time such as 2026-11-01T00:00:00Z")
		return
	}
	to, err := time.Parse(time.RFC3339, v.Get("to"))
	if err != nil {
		writeError(w, r, http.StatusBadRequest, string(platform.CodeInvalid), "to must be an RFC 3339 time such as 2026-12-01T00:00:00Z")
		return
	}
	q := platform.UsageQuery{From: from, To: to, User: v.Get("user"), Project: v.Get("project"), Group: v.Get("group")}
	if by := v.Get("by"); by != "" {
		for _, d := range strings.Split(by, ",") {
			q.By = append(q.By, strings.TrimSpace(d))
		}
	}
	rows, err := h.d.Platform.Allocation.Usage(r.Context(), q)
	if err != nil {
		writePlatformError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="usage-%s-%s.csv"`, from.Format("20060102"), to.Format("20060102")))
	writeUsageCSV(w, q, rows)
}

// writeUsageCSV writes the usage rows of q as CSV. Text cells (names, ids,
// currencies) go through csvText: a tenant's users name projects, groups
// and models, and the file is opened in spreadsheets.
func writeUsageCSV(w io.Writer, q platform.UsageQuery, rows []platform.UsageRow) {
	out := csv.NewWriter(w)
	var header []string
	for _, d := range q.By {
		header = append(header, d+"_id", d)
	}
	header = append(header, "from", "to", "gpu_hours", "budget_hours", "cost", "currency",
		"calls", "input_tokens", "output_tokens", "token_cost", "token_currency")
	_ = out.Write(header)
	for _, row := range rows {
		var rec []string
		for _, k := range row.Keys {
			rec = append(rec, csvText(k.ID), csvText(k.Name))
		}
		rec = append(rec, q.From.UTC().Format(time.RFC3339), q.To.UTC().Format(time.RFC3339),
			strconv.FormatFloat(float64(row.MicroGPUHours)/1e6, 'f', 6, 64),
			strconv.FormatFloat(float64(row.MicroBudgetHours)/1e6, 'f', 6, 64),
			strconv.FormatFloat(row.Cost, 'f', 2, 64), csvText(row.Currency),
			strconv.FormatInt(row.Calls, 10), strconv.FormatInt(row.InputTokens, 10), strconv.FormatInt(row.OutputTokens, 10),
			strconv.FormatFloat(float64(row.TokenCostMicros)/1e6, 'f', 6, 64), csvText(row.TokenCurrency))
		_ = out.Write(rec)
	}
	out.Flush()
}

// csvText escapes a text cell against formula injection (OWASP's CSV
// injection advice): a cell that begins with =, +, -, @, a tab or a
// carriage return is run as a formula by spreadsheets (a project named
// "=HYPERLINK(...)" would become a link in the admin's chargeback sheet),
// so it gets a leading single quote, which spreadsheets show as text.
// Numbers are written by the server and left as they are.
func csvText(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
