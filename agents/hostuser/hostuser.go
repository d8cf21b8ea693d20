// Package hostuser hands out the uids and gids a worker running as root
// gives its tasks on a shared host (agents/worker, "What is isolated on a
// host" in docs/worker.md): a range of ids no account uses, the lowest free
// first, and the sweep of what a task left running under its uid.
package hostuser

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Range is the range of uids (and gids) a worker running as root gives
// its tasks: each running task a uid of its own, each project a gid of its
// own (the group of its environment cache), for as long as they need one.
// No account on the host may use these ids.
type Range struct {
	First, Last uint32
}

// Default is the range a worker running as root takes when none is
// given (--task-uids).
var Default = Range{First: 20000, Last: 20999}

// ParseRange reads "FIRST-LAST", such as 20000-20999.
func ParseRange(s string) (Range, error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), "-")
	first, err1 := strconv.ParseUint(strings.TrimSpace(a), 10, 32)
	last, err2 := strconv.ParseUint(strings.TrimSpace(b), 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return Range{}, fmt.Errorf("--task-uids %q: write a range of uids as FIRST-LAST, such as 20000-20999", s)
	}
	r := Range{First: uint32(first), Last: uint32(last)}
	if err := r.Check(); err != nil {
		return Range{}, fmt.Errorf("--task-uids %q: %w", s, err)
	}
	return r, nil
}

// Check refuses a range among the system's accounts, reversed, or past
// the largest uid.
func (r Range) Check() error {
	switch {
	case r.First < 1000:
		return fmt.Errorf("the range starts at %d, among the system's accounts: start at 1000 or above (the default is %d-%d)",
			r.First, Default.First, Default.Last)
	case r.Last < r.First:
		return fmt.Errorf("the range ends (%d) before it starts (%d)", r.Last, r.First)
	case r.Last >= 1<<31-1:
		return fmt.Errorf("the range ends at %d, above the largest uid (%d)", r.Last, 1<<31-2)
	}
	return nil
}

func (r Range) String() string { return fmt.Sprintf("%d-%d", r.First, r.Last) }

// Pool hands out the ids of a range: lowest free first.
type Pool struct {
	r    Range
	mu   sync.Mutex
	used map[uint32]bool
}

// NewPool is a pool of the ids of r, none in use.
func NewPool(r Range) *Pool { return &Pool{r: r, used: map[uint32]bool{}} }

// Take takes the lowest free id, or says the range is used up.
func (p *Pool) Take() (uint32, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id := p.r.First; ; id++ {
		if !p.used[id] {
			p.used[id] = true
			return id, nil
		}
		if id == p.r.Last {
			break
		}
	}
	return 0, fmt.Errorf("every id of the range %s is in use: give the worker a larger range with --task-uids", p.r)
}

// Give frees id for the next Take.
func (p *Pool) Give(id uint32) {
	p.mu.Lock()
	delete(p.used, id)
	p.mu.Unlock()
}

// Kill kills every process whose real or effective uid is uid: what a
// task left running outside its process group (a daemon that called
// setsid), so that the next task given the uid finds nothing of it. It
// returns how many it killed.
func Kill(uid uint32) int {
	des, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	n := 0
	for _, de := range des {
		pid, err := strconv.Atoi(de.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + de.Name() + "/status")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			rest, ok := strings.CutPrefix(line, "Uid:")
			if !ok {
				continue
			}
			f := strings.Fields(rest)
			if len(f) >= 2 && (f[0] == strconv.Itoa(int(uid)) || f[1] == strconv.Itoa(int(uid))) {
				if syscall.Kill(pid, syscall.SIGKILL) == nil {
					n++
				}
			}
			break
		}
	}
	return n
}
