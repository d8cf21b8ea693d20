package config

import (
	"strings"
	"testing"
	"time"
)

// The limits on schedules (issue 39 defect 9) come from the environment;
// unset, they read as 0 (the platform's defaults), and a value out of
// bounds is refused with the variable and its bounds.
func TestScheduleLimitsComeFromTheEnvironment(t *testing.T) {
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}
	c, err := FromEnv(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.ScheduleMinInterval != 0 || c.SchedulesPerUser != 0 || c.SchedulesPerProject != 0 || c.TriggerRunsPerHour != 0 {
		t.Fatalf("unset limits read as %+v, want zeros (the platform's defaults)", c)
	}
	c, err = FromEnv(env(map[string]string{"KLIQUE_SCHEDULE_MIN_INTERVAL": "5m", "KLIQUE_SCHEDULES_PER_USER": "7",
		"KLIQUE_SCHEDULES_PER_PROJECT": "9", "KLIQUE_TRIGGER_RUNS_PER_HOUR": "11"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.ScheduleMinInterval != 5*time.Minute || c.SchedulesPerUser != 7 || c.SchedulesPerProject != 9 || c.TriggerRunsPerHour != 11 {
		t.Fatalf("limits read as %s %d %d %d", c.ScheduleMinInterval, c.SchedulesPerUser, c.SchedulesPerProject, c.TriggerRunsPerHour)
	}
	for _, bad := range []string{"500ms", "25h", "-1m", "soon"} {
		_, err := FromEnv(env(map[string]string{"KLIQUE_SCHEDULE_MIN_INTERVAL": bad}))
		if err == nil || !strings.Contains(err.Error(), "KLIQUE_SCHEDULE_MIN_INTERVAL") {
			t.Errorf("KLIQUE_SCHEDULE_MIN_INTERVAL=%s: %v, want an error naming the variable", bad, err)
		}
	}
	_, err = FromEnv(env(map[string]string{"KLIQUE_TRIGGER_RUNS_PER_HOUR": "0"}))
	if err == nil || !strings.Contains(err.Error(), "between 1 and 100000") {
		t.Errorf("KLIQUE_TRIGGER_RUNS_PER_HOUR=0: %v", err)
	}
}
