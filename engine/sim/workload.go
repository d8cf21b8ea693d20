package sim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// WorkloadFormat documents the workload file, for help texts.
const WorkloadFormat = `A workload is JSON lines, one object per line. Blank lines and lines
starting with # are ignored. A task line:

  {"at": "2026-12-03T09:00:00Z", "group": "ml-research", "computeResource": "1 GPU", "duration": "2h"}
  {"at": 5400, "group": "nlp", "computeResource": "flexible", "size": "2x8", "duration": "90m", "count": 4}

  at               when the task arrives: an RFC 3339 time, or seconds after the start
  group            the group whose compute resource it is sent to
  computeResource  the compute resource's name in that group's policy
  size             the task's GPU size, only for profiles that read sizes from tasks
                   (default: the profile's size)
  duration         how long it runs once placed: a Go duration ("2h", "90m") or seconds
  count            how many such tasks arrive at once (default 1)

A line may instead give the budget hours a group has already used in the
period that holds the start, so that a day late in a week can be simulated:

  {"group": "vision", "budgetUsed": 1950}`

// Workload is what a simulation runs: task arrivals, and budget use before
// the start.
type Workload struct {
	Arrivals []Arrival
	// BudgetUsed are budget hours already used, per group name, in the
	// period that holds the start.
	BudgetUsed []BudgetUse
}

// Arrival is one line of tasks of a workload.
type Arrival struct {
	// Line is the line of the workload file, for errors.
	Line int
	// At is when the tasks arrive; when it is zero, Offset after the start.
	At              time.Time
	Offset          time.Duration
	Group           string
	ComputeResource string
	// Size is as given ("" for the profile's).
	Size     string
	Duration time.Duration
	Count    int
}

// BudgetUse is budget already spent at the start.
type BudgetUse struct {
	Line  int
	Group string
	// MicroHours is in millionths of a budget hour.
	MicroHours int64
}

type line struct {
	At              json.RawMessage `json:"at"`
	Group           string          `json:"group"`
	ComputeResource string          `json:"computeResource"`
	Size            json.RawMessage `json:"size"`
	Duration        json.RawMessage `json:"duration"`
	Count           *int            `json:"count"`
	BudgetUsed      json.RawMessage `json:"budgetUsed"`
}

// ParseWorkload reads a workload (see WorkloadFormat). Errors name the
// line.
func ParseWorkload(r io.Reader) (*Workload, error) {
	w := &Workload{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		if err := w.parseLine(n, []byte(text)); err != nil {
			return nil, fmt.Errorf("workload line %d: %w", n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("workload line %d: %w", n+1, err)
	}
	if len(w.Arrivals) == 0 {
		return nil, fmt.Errorf("the workload has no tasks")
	}
	return w, nil
}

func (w *Workload) parseLine(n int, text []byte) error {
	var l line
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return fmt.Errorf("not a JSON object of a workload: %v", err)
	}
	if dec.More() {
		return fmt.Errorf("more than one JSON value on the line")
	}
	if l.Group == "" {
		return fmt.Errorf("group is required")
	}
	if l.BudgetUsed != nil {
		if l.At != nil || l.ComputeResource != "" || l.Size != nil || l.Duration != nil || l.Count != nil {
			return fmt.Errorf("a budgetUsed line gives only group and budgetUsed")
		}
		hours, err := number(l.BudgetUsed)
		if err != nil || hours < 0 || hours > 1e9 {
			return fmt.Errorf("budgetUsed must be a number of budget hours, at least 0")
		}
		w.BudgetUsed = append(w.BudgetUsed, BudgetUse{Line: n, Group: l.Group, MicroHours: int64(math.Round(hours * 1e6))})
		return nil
	}
	a := Arrival{Line: n, Group: l.Group, ComputeResource: l.ComputeResource, Count: 1}
	if a.ComputeResource == "" {
		return fmt.Errorf("computeResource is required")
	}
	if l.At == nil {
		return fmt.Errorf(`at is required: an RFC 3339 time ("2026-12-03T09:00:00Z") or seconds after the start`)
	}
	var s string
	if json.Unmarshal(l.At, &s) == nil {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return fmt.Errorf(`at %q is not an RFC 3339 time such as "2026-12-03T09:00:00Z"`, s)
		}
		a.At = t.UTC()
	} else {
		secs, err := number(l.At)
		if err != nil || secs < 0 {
			return fmt.Errorf("at must be an RFC 3339 time or seconds after the start, at least 0")
		}
		a.Offset = seconds(secs)
	}
	if l.Size != nil {
		var sz string
		if json.Unmarshal(l.Size, &sz) != nil {
			f, err := number(l.Size)
			if err != nil {
				return fmt.Errorf(`size must be a GPU size such as "0.5", "1", "8" or "2x8"`)
			}
			sz = strconv.FormatFloat(f, 'f', -1, 64)
		}
		a.Size = sz
	}
	if l.Duration == nil {
		return fmt.Errorf(`duration is required: how long the task runs once placed ("2h", "90m" or seconds)`)
	}
	var ds string
	if json.Unmarshal(l.Duration, &ds) == nil {
		d, err := time.ParseDuration(ds)
		if err != nil {
			return fmt.Errorf(`duration %q is not a duration such as "2h" or "90m"`, ds)
		}
		a.Duration = d
	} else {
		secs, err := number(l.Duration)
		if err != nil {
			return fmt.Errorf(`duration must be a duration such as "2h" or a number of seconds`)
		}
		a.Duration = seconds(secs)
	}
	if a.Duration <= 0 {
		return fmt.Errorf("duration must be more than 0")
	}
	if l.Count != nil {
		if *l.Count < 1 || *l.Count > 100_000 {
			return fmt.Errorf("count must be 1 to 100000")
		}
		a.Count = *l.Count
	}
	w.Arrivals = append(w.Arrivals, a)
	return nil
}

func number(raw json.RawMessage) (float64, error) {
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		return 0, err
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("not a finite number")
	}
	return f, nil
}

func seconds(s float64) time.Duration {
	if s > float64(math.MaxInt64/int64(time.Second)) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(math.Round(s * float64(time.Second)))
}
