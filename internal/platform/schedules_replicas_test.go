package platform_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/platform"
	"github.com/klique-ai/klique/internal/platform/platformtest"
	"github.com/klique-ai/klique/internal/store/pgtest"
	"github.com/klique-ai/klique/internal/store/postgres"
)

// Two replicas (two services, each with its own connections to one
// PostgreSQL database) running the schedules pass at once, many times,
// fire each due firing once: one task per period, never two.
func TestDueScheduleFiresOnceAcrossTwoReplicas(t *testing.T) {
	url := pgtest.RequirePostgresURL(t)
	ctx := context.Background()
	st1, err := postgres.Open(ctx, url)
	platformtest.Must(t, err)
	b := &testBundle{platformtest.New(t, st1, platformtest.WithClock(scheduleStart))}
	st2, err := postgres.Open(ctx, url)
	platformtest.Must(t, err)
	t.Cleanup(func() { _ = st2.Close() })
	other := platform.New(platform.Options{Store: st2, Now: b.Clock.Now, Logger: b.Logger})

	rita, orig := scheduleBundle(t, b)
	const schedulesN = 3
	for i := range schedulesN {
		createSchedule(t, b, rita, platform.ScheduleInput{Name: ptr("minutely " + string(rune('a'+i))), TargetID: ptr(orig.ID), Cron: ptr("* * * * *")})
	}
	const periods = 5
	for period := 1; period <= periods; period++ {
		b.Clock.Set(scheduleStart.Add(time.Duration(period) * time.Minute))
		var wg sync.WaitGroup
		var mu sync.Mutex
		fired := 0
		for _, svc := range []*platform.Service{b.Svc, other, b.Svc, other} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 5 {
					res, err := svc.TickSchedules(ctx)
					if err != nil {
						t.Errorf("pass: %v", err)
						return
					}
					mu.Lock()
					fired += res.Fired
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if fired != schedulesN {
			t.Fatalf("period %d: the passes fired %d times, want %d (once per schedule)", period, fired, schedulesN)
		}
	}
	clones := clonesOf(t, b, orig)
	if len(clones) != schedulesN*periods {
		t.Fatalf("%d tasks started, want %d", len(clones), schedulesN*periods)
	}
	scheds, err := b.Svc.Schedules(rita)
	platformtest.Must(t, err)
	for _, sc := range scheds {
		runs, err := b.Svc.ScheduleRuns(rita, sc.ID, 100)
		platformtest.Must(t, err)
		if len(runs) != periods {
			t.Errorf("%s: %d firings recorded, want %d", sc.Name, len(runs), periods)
		}
		seen := map[string]bool{}
		for _, r := range runs {
			if seen[r.RunID] {
				t.Errorf("%s: task %s recorded twice", sc.Name, r.RunID)
			}
			seen[r.RunID] = true
		}
	}
}
