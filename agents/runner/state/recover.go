package state

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/klique-ai/klique/agents/runner"
)

// KillWait bounds how long, after SIGKILL, Recover waits for a process
// group to be gone before it counts it as not stoppable.
var KillWait = 10 * time.Second

// ContainerRemover removes a container by name (docker rm -f) and reports
// whether it existed; an error means it is still there or the remover
// could not tell (the Docker daemon is down), and it counts as running.
type ContainerRemover func(ctx context.Context, name string) (existed bool, err error)

// Recover stops the work of every record, which an earlier run of the
// worker left: a process group gets SIGTERM, grace to end, then SIGKILL; a
// container is removed with remove (nil: the runner cannot remove
// containers, and they count as running). Records whose work is gone are
// removed; the others stay, so a later Recover tries again. It returns one
// Leftover per record (and per unreadable file), in file order.
func (d *Dir) Recover(ctx context.Context, grace time.Duration, remove ContainerRemover) ([]runner.Leftover, error) {
	entries, err := d.List()
	if err != nil {
		return nil, err
	}
	out := make([]runner.Leftover, len(entries))
	var wg sync.WaitGroup
	for i, e := range entries {
		if e.Err != nil {
			out[i] = runner.Leftover{What: e.File, Err: e.Err}
			continue
		}
		r := e.Record
		out[i] = runner.Leftover{TaskID: r.TaskID, Attempt: r.Attempt, GPUs: append([]int(nil), r.GPUs...), What: r.What()}
		wg.Add(1)
		go func(l *runner.Leftover) {
			defer wg.Done()
			var err error
			switch {
			case r.Container != "" && remove == nil:
				err = fmt.Errorf("%s was started in docker mode; start the worker with --mode docker to remove it, or remove it by hand (docker rm -f %s)",
					r.What(), r.Container)
			case r.Container != "":
				l.WasRunning, err = remove(ctx, r.Container)
			default:
				l.WasRunning = r.GroupAlive()
				if l.WasRunning {
					err = StopGroup(ctx, r, grace)
				}
			}
			if err != nil {
				l.Running, l.Err = true, err
				return
			}
			if rerr := d.Remove(r.TaskID, r.Attempt); rerr != nil {
				l.Err = rerr
			}
		}(&out[i])
	}
	wg.Wait()
	return out, nil
}

// Process returns what a record needs to tell process pid from a later one
// given the same id: its start time (clock ticks after boot) and the boot.
func Process(pid int) (startTime uint64, bootID string, err error) {
	st, err := readStat(pid)
	if err != nil {
		return 0, "", err
	}
	return st.start, currentBoot(), nil
}

// GroupAlive reports whether the record's process group still has a
// process: its leader (the same process: same start time, same boot), or,
// once the leader is gone, any process left in its group. A group id is
// not given to a new process while the group has a member, so a leader id
// now held by another process means the group is gone.
func (r *Record) GroupAlive() bool {
	if r.PID <= 0 {
		return false
	}
	if r.BootID != "" && currentBoot() != "" && r.BootID != currentBoot() {
		return false
	}
	st, err := readStat(r.PID)
	if err == nil {
		if r.StartTime != 0 && st.start != r.StartTime {
			return false
		}
		if !st.zombie {
			return true
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		// No /proc to tell: ask the kernel about the group itself.
		return syscall.Kill(-r.PID, 0) == nil
	}
	return groupHasMembers(r.PID)
}

// StopGroup sends SIGTERM to the record's process group, waits up to grace
// for it to end, then sends SIGKILL and waits up to KillWait for it to be
// gone.
func StopGroup(ctx context.Context, r *Record, grace time.Duration) error {
	if err := signalGroup(r.PID, syscall.SIGTERM); err != nil {
		return err
	}
	if waitGone(ctx, r, grace) {
		return nil
	}
	if err := signalGroup(r.PID, syscall.SIGKILL); err != nil {
		return err
	}
	if waitGone(ctx, r, KillWait) {
		return nil
	}
	return fmt.Errorf("%s is still running %s after SIGKILL", r.What(), KillWait)
}

func signalGroup(pgid int, sig syscall.Signal) error {
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal process group %d: %w (the worker must run as the tasks' user, or as root)", pgid, err)
	}
	return nil
}

func waitGone(ctx context.Context, r *Record, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if !r.GroupAlive() {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type stat struct {
	pgrp   int
	start  uint64
	zombie bool
}

// readStat reads /proc/PID/stat: the state (field 3), the process group
// (field 5) and the start time (field 22). The command name (field 2) may
// hold spaces and parentheses, so fields are counted after its last ')'.
func readStat(pid int) (stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return stat{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return stat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	pgrp, err1 := strconv.Atoi(f[2])
	start, err2 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil {
		return stat{}, fmt.Errorf("/proc/%d/stat: bad process group or start time", pid)
	}
	return stat{pgrp: pgrp, start: start, zombie: f[0] == "Z" || f[0] == "X"}, nil
}

// groupHasMembers reports whether a live process is in group pgid.
func groupHasMembers(pgid int) bool {
	des, err := os.ReadDir("/proc")
	if err != nil {
		return syscall.Kill(-pgid, 0) == nil
	}
	for _, de := range des {
		pid, err := strconv.Atoi(de.Name())
		if err != nil {
			continue
		}
		if st, err := readStat(pid); err == nil && st.pgrp == pgid && !st.zombie {
			return true
		}
	}
	return false
}

var (
	bootOnce sync.Once
	bootID   string
)

// currentBoot is the kernel's boot id ("" when unknown).
func currentBoot() string {
	bootOnce.Do(func() {
		if b, err := os.ReadFile("/proc/sys/kernel/random/boot_id"); err == nil {
			bootID = strings.TrimSpace(string(b))
		}
	})
	return bootID
}
