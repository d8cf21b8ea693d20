// Package state is the worker's record on disk of the work its runners
// started and that may outlive the worker: one small JSON file per running
// attempt, written atomically (a temporary file, then a rename), saying
// which task and attempt it is, which GPUs it holds, and how to find it
// again (the process group's leader with its start time, or the Docker
// container's name).
//
// A worker killed with SIGKILL cannot stop its tasks: a process group or
// a container goes on running, holding GPUs the restarted worker would
// otherwise hand out again. The restarted worker reads the records before
// it claims anything, stops what is still running, and keeps the GPUs of
// what it cannot stop out of its allocatable set (see Recover).
package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Record is one running attempt as a runner started it.
type Record struct {
	TaskID  string `json:"taskId"`
	Attempt int    `json:"attempt"`
	// GPUs are the host indices the attempt holds.
	GPUs []int `json:"gpus"`
	// Runner is the runner that started it: process or docker.
	Runner string `json:"runner"`
	// PID is the leader of the attempt's process group (its id is the
	// group's), StartTime its start in clock ticks after boot
	// (/proc/PID/stat field 22) and BootID the boot it ran in: together
	// they tell the process from a later one given the same id.
	PID       int    `json:"pid,omitempty"`
	StartTime uint64 `json:"startTime,omitempty"`
	BootID    string `json:"bootId,omitempty"`
	// Container is the Docker container's name (unique per attempt).
	Container string `json:"container,omitempty"`
	// WorkerPID is the worker daemon that wrote the record.
	WorkerPID int       `json:"workerPid"`
	StartedAt time.Time `json:"startedAt"`
}

// What names the record's work in logs.
func (r *Record) What() string {
	switch {
	case r.Container != "":
		return "container " + r.Container
	case r.PID > 0:
		return "process group " + strconv.Itoa(r.PID)
	}
	return "nothing"
}

// Dir is a state directory. A nil *Dir records nothing.
type Dir struct{ path string }

// New returns the state directory at path (created on the first write);
// nil when path is empty.
func New(path string) *Dir {
	if path == "" {
		return nil
	}
	return &Dir{path: path}
}

// Path is the directory.
func (d *Dir) Path() string { return d.path }

const (
	suffix        = ".json"
	tmpPrefix     = ".tmp-"
	corruptSuffix = ".corrupt"
	lockName      = "lock"
)

// file is the record file of one attempt.
func (d *Dir) file(taskID string, attempt int) string {
	return filepath.Join(d.path, safeName(taskID)+"."+strconv.Itoa(attempt)+suffix)
}

// Write records r, replacing the attempt's earlier record, atomically: a
// reader sees the old record or the new one, never half of one, even if
// the worker is killed while writing.
func (d *Dir) Write(r *Record) error {
	if d == nil {
		return nil
	}
	if r.TaskID == "" {
		return errors.New("state: a record needs a task id")
	}
	if r.WorkerPID == 0 {
		r.WorkerPID = os.Getpid()
	}
	if r.StartedAt.IsZero() {
		r.StartedAt = time.Now().UTC()
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("state: encode the record of task %s: %w", r.TaskID, err)
	}
	if err := os.MkdirAll(d.path, 0o700); err != nil {
		return fmt.Errorf("state: create the state directory: %w", err)
	}
	f, err := os.CreateTemp(d.path, tmpPrefix+"*")
	if err != nil {
		return fmt.Errorf("state: record task %s: %w", r.TaskID, err)
	}
	tmp := f.Name()
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, d.file(r.TaskID, r.Attempt))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("state: record task %s in %s: %w", r.TaskID, d.path, err)
	}
	syncDir(d.path)
	return nil
}

// Remove forgets an attempt's record (once its work has ended).
func (d *Dir) Remove(taskID string, attempt int) error {
	if d == nil {
		return nil
	}
	if err := os.Remove(d.file(taskID, attempt)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("state: remove the record of task %s: %w", taskID, err)
	}
	return nil
}

// Entry is one record file as List read it: its record, or why it could
// not be read.
type Entry struct {
	File   string
	Record *Record
	// Err says why the file could not be read; the file was moved aside
	// (renamed with the suffix .corrupt) so that it is read only once.
	Err error
}

// List reads every record, by file name. A file that cannot be read or
// decoded is quarantined (renamed NAME.corrupt) and returned with its
// error, so one bad file neither stops the worker nor is reported again at
// every start. Temporary files of a write that never finished are removed.
func (d *Dir) List() ([]Entry, error) {
	if d == nil {
		return nil, nil
	}
	des, err := os.ReadDir(d.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state: read the state directory: %w", err)
	}
	var out []Entry
	for _, de := range des {
		name := de.Name()
		p := filepath.Join(d.path, name)
		switch {
		case strings.HasPrefix(name, tmpPrefix):
			_ = os.Remove(p)
			continue
		case de.IsDir() || !strings.HasSuffix(name, suffix):
			continue
		}
		r, err := readRecord(p)
		if err != nil {
			q := p + corruptSuffix
			if rerr := os.Rename(p, q); rerr != nil {
				err = fmt.Errorf("%w (and it could not be moved aside: %v)", err, rerr)
			} else {
				err = fmt.Errorf("%w; moved aside to %s", err, filepath.Base(q))
			}
		}
		out = append(out, Entry{File: p, Record: r, Err: err})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].File < out[j].File })
	return out, nil
}

func readRecord(p string) (*Record, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("state: read %s: %w", p, err)
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("state: %s is not a record of a running task (%v): whatever it recorded was not stopped; check for a process or container of the worker's previous run", p, err)
	}
	if r.TaskID == "" || (r.PID <= 0 && r.Container == "") {
		return nil, fmt.Errorf("state: %s names no task, process or container: whatever it recorded was not stopped; check for a process or container of the worker's previous run", p)
	}
	return &r, nil
}

// Lock takes the state directory for this process, so that two workers
// never share one (the second would take the first's running tasks for
// leftovers and stop them). The lock is released by unlock, or by the
// kernel when the process dies, however it dies.
func (d *Dir) Lock() (unlock func(), err error) {
	if d == nil {
		return func() {}, nil
	}
	if err := os.MkdirAll(d.path, 0o700); err != nil {
		return nil, fmt.Errorf("create the state directory %s: %w", d.path, err)
	}
	p := filepath.Join(d.path, lockName)
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", p, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(p)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another worker (pid %s) uses the state directory %s: give each worker on a host its own --state-dir (or --work-dir)",
				orUnknown(strings.TrimSpace(string(holder))), d.path)
		}
		return nil, fmt.Errorf("lock %s: %w", p, err)
	}
	_ = f.Truncate(0)
	_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// syncDir makes a rename in dir durable; best effort.
func syncDir(dir string) {
	if f, err := os.Open(dir); err == nil {
		_ = f.Sync()
		f.Close()
	}
}

// safeName makes a task id usable in a file name.
func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '_'
	}, s)
}
