package sqlite_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
	"github.com/klique-ai/klique/internal/store/sqlite"
)

// BenchmarkInsertModelCalls writes the gateway's ledger rows to a SQLite
// file (WAL, as `klique serve` opens it) in batches of the sizes the
// gateway's meter makes: one row when idle, a few under load. It reports
// the CPU-bound cost per row, which is what a call pays for its row.
//
//	go test ./internal/store/sqlite -run '^$' -bench InsertModelCalls -benchmem
func BenchmarkInsertModelCalls(b *testing.B) {
	for _, n := range []int{1, 3, 7, 24, 64} {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			s, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "klique.db"))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = s.Close() })
			if err := s.CreateTenant(b.Context(), &model.Tenant{ID: "t1", Name: "acme", CreatedAt: time.Now()}); err != nil {
				b.Fatal(err)
			}
			at := time.Now()
			batch := make([]*model.ModelCall, n)
			seq := 0
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i += n {
				for j := range batch {
					seq++
					batch[j] = &model.ModelCall{ID: fmt.Sprintf("req-%012d", seq), TenantID: "t1", At: at.Add(time.Duration(seq) * time.Microsecond),
						UserID: "u1", UserName: "vic", ProjectID: "p1", ProjectName: "detect", Endpoint: "chat", Alias: "chat", Model: "llama",
						Target: "mock", InputTokens: 21, OutputTokens: 11, CostMicros: 6400, Currency: "USD", LatencyMicros: 900, Status: 200, Outcome: "ok"}
				}
				if err := s.InsertModelCalls(b.Context(), batch); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
