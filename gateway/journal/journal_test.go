package journal

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
)

func row(i int) *model.ModelCall {
	return &model.ModelCall{ID: fmt.Sprintf("call-%06d", i), TenantID: "t1", At: time.Unix(1_700_000_000, 0).UTC(),
		Alias: "chat", Target: strings.Repeat("x", 400), Status: 200, Outcome: model.CallOK}
}

func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "calls-*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestSegmentsRollOverAndGoOnceTheirRowsAreOnTheLedger: past segmentBytes
// a new segment begins; Durable removes the closed segments whose last
// row's ticket is on the ledger, never the open one, and a reopened
// journal finds the rows of the segments left, in order.
func TestSegmentsRollOverAndGoOnceTheirRowsAreOnTheLedger(t *testing.T) {
	dir := t.TempDir()
	j, found, err := Open(dir)
	if err != nil || len(found) != 0 {
		t.Fatalf("a new journal: %v, found %d segments", err, len(found))
	}
	n := 0
	for j.n < 3 { // the open segment's number: the first is 1
		n++
		if err := j.Append(row(n), uint64(n)); err != nil {
			t.Fatal(err)
		}
	}
	firstOfThird := n // the row that began the third segment
	if err := j.Durable(uint64(firstOfThird-1), false); err != nil {
		t.Fatal(err)
	}
	if got := segmentFiles(t, dir); len(got) != 1 {
		t.Fatalf("segments once the first two are on the ledger: %v, want only the open one", got)
	}
	if err := j.Append(row(n+1), uint64(n+1)); err != nil {
		t.Fatal(err)
	}
	j.Close()

	j, found, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if len(found) != 1 || len(found[0]) != 2 || found[0][0].ID != row(firstOfThird).ID || found[0][1].ID != row(n+1).ID {
		t.Fatalf("the reopened journal found %d segments, want the open one's 2 rows", len(found))
	}
	if *found[0][1] != *row(n + 1) {
		t.Fatalf("a row read back is %+v, want %+v", *found[0][1], *row(n + 1))
	}
}

// TestADirectoryIsOneProcesssAtATime: a second Open of a held directory is
// refused with ErrBusy, and succeeds once the first is closed.
func TestADirectoryIsOneProcesssAtATime(t *testing.T) {
	dir := t.TempDir()
	j, _, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(dir); !errors.Is(err, ErrBusy) {
		t.Fatalf("a second Open of a held directory: %v, want ErrBusy", err)
	}
	j.Close()
	j, _, err = Open(dir)
	if err != nil {
		t.Fatalf("Open once the first closed: %v", err)
	}
	j.Close()
}
