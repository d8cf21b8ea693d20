package schedules

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klique-ai/klique/internal/model"
)

// FuzzScheduleSpec feeds a schedule's when (a cron expression, or a
// trigger's event and fields) to what reads it before a schedule is
// stored: ParseCron, the trigger's stray-field check, and describeWhen.
// Nothing may panic. An accepted expression fires strictly after any time
// (or never, past the parser's horizon), as NextRun says, and the same
// with spaces around it; six fields (seconds) and time zones are refused.
// The stray fields are exactly those set that the event does not take.
//
// Seeds live in testdata/fuzz/FuzzScheduleSpec; run it with
//
//	go test -run '^$' -fuzz FuzzScheduleSpec -fuzztime 60s ./internal/platform/schedules
func FuzzScheduleSpec(f *testing.F) {
	f.Add("0 3 * * *", "task.completed", "p1", "nightly", "", "", "")
	f.Add("@every 1h", "artifact.published", "", "", "model.bin", "", "")
	f.Add("*/5 1-3 1,15 * MON-FRI", "pipeline.finished", "p1", "x", "", "train", "completed")
	f.Add("0 0 30 2 *", "", "", "", "", "", "")
	f.Fuzz(func(t *testing.T, expr, event, project, tag, artifact, pipeline, state string) {
		s, err := ParseCron(expr)
		if _, err2 := ParseCron(" " + expr + "\t"); (err == nil) != (err2 == nil) {
			t.Fatalf("%q and with spaces around it: %v, %v", expr, err, err2)
		}
		trimmed := strings.TrimSpace(expr)
		if err == nil {
			if !strings.HasPrefix(trimmed, "@") && len(strings.Fields(trimmed)) != 5 {
				t.Fatalf("%q accepted with %d fields", expr, len(strings.Fields(trimmed)))
			}
			if strings.HasPrefix(trimmed, "TZ=") || strings.HasPrefix(trimmed, "CRON_TZ=") {
				t.Fatalf("%q accepted with a time zone", expr)
			}
			for _, at := range []time.Time{time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 2, 28, 23, 59, 59, 999, time.UTC),
				time.Date(2031, 12, 31, 23, 0, 0, 0, time.UTC)} {
				next := s.Next(at)
				if !next.IsZero() && !next.After(at) {
					t.Fatalf("%q: next firing after %v is %v", expr, at, next)
				}
				if nr, err := NextRun(expr, at); err != nil || !nr.Equal(next.UTC()) {
					t.Fatalf("%q: NextRun after %v = %v, %v; the schedule says %v", expr, at, nr, err, next)
				}
			}
			// Interval is a lower bound on the time between two firings,
			// which the minimum interval is held to.
			d, err := Interval(expr)
			if err != nil {
				t.Fatalf("%q parses but has no interval: %v", expr, err)
			}
			if !strings.HasPrefix(trimmed, "@every") {
				at := time.Date(2026, 2, 28, 23, 0, 0, 0, time.UTC)
				for i, prev := 0, s.Next(at); i < 50 && !prev.IsZero(); i++ {
					next := s.Next(prev)
					if next.IsZero() {
						break
					}
					if gap := next.Sub(prev); gap < d {
						t.Fatalf("%q fires %v then %v, %v apart, under its interval %v", expr, prev, next, gap, d)
					}
					prev = next
				}
			}
		}

		trig := model.ScheduleTrigger{Event: event, ProjectID: project, Tag: tag, Artifact: artifact, Pipeline: pipeline, State: state}
		set := map[string]bool{"project": project != "", "tag": tag != "", "artifact": artifact != "", "pipeline": pipeline != "", "state": state != ""}
		stray := strayFields(trig)
		for _, name := range stray {
			if !set[name] || slices.Contains(triggerFields[event], name) {
				t.Fatalf("%s trigger: %q named stray among %v", event, name, stray)
			}
		}
		for name, on := range set {
			if on && !slices.Contains(triggerFields[event], name) && !slices.Contains(stray, name) {
				t.Fatalf("%s trigger: %q set, not taken by the event, and not named stray (%v)", event, name, stray)
			}
		}
		if describeWhen(&model.Schedule{Cron: trimmed, Trigger: &trig}) == "" || describeWhen(&model.Schedule{Trigger: &trig}) == "" {
			t.Fatal("describeWhen said nothing")
		}
	})
}
