// Package journal is the LLM gateway's write-ahead file of ledger rows.
package journal

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/klique-ai/klique/internal/model"
)

// Journal is the gateway meter's write-ahead file: the row of every call the
// gateway answers is appended to it before the answer's last bytes go out,
// and the ledger's group commit follows behind. So an answer waits for one
// write(2) into the operating system's page cache, never for the database,
// and the guarantee of the group commit holds: a gateway killed at any
// moment (kill -9) has every answered call's row in the journal, and the
// next start writes the rows the ledger lacks before it serves (the ledger
// keeps a call once however often it is written). What the journal does not
// survive is the machine losing power before the page cache reaches its
// disk, the window any database without fsync has too: the ledger's own
// write is the durable one, a moment later.
//
// The rows are JSON lines in numbered segment files; a segment is removed
// once every row in it is on the ledger. A torn last line (the kill came
// mid-write) is the row of a call whose answer had not ended, and is
// skipped. The directory is locked (flock) by the process that writes it:
// another process finding it locked runs without a journal rather than
// replay and remove the segments of a live gateway.
type Journal struct {
	dir  string
	lock *os.File
	f    *os.File
	// n is the open segment's number and size its bytes.
	n    int
	size int64
	// segs are the segments not yet removed, oldest first, each with the
	// ticket of its last row (the open one's grows).
	segs []segment
	// line holds a row as enc writes it, before its one write.
	line bytes.Buffer
	enc  *json.Encoder
}

type segment struct {
	n    int
	last uint64
}

// segmentBytes is when a segment is closed and a new one begun: a closed
// segment is removed once its rows are on the ledger.
const segmentBytes = 4 << 20

// ErrBusy: another process holds the journal's directory.
var ErrBusy = errors.New("the journal's directory is locked by another process")

// Open locks dir (creating it) and reads the rows its segments
// hold, oldest first; the caller queues them for the ledger and tells the
// journal their tickets (Recovered).
func Open(dir string) (*Journal, [][]*model.ModelCall, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("gateway journal: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("gateway journal: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, nil, fmt.Errorf("gateway journal %s: %w", dir, ErrBusy)
		}
		return nil, nil, fmt.Errorf("gateway journal %s: lock: %w", dir, err)
	}
	j := &Journal{dir: dir, lock: lock}
	j.enc = json.NewEncoder(&j.line)
	nums, err := j.segmentNumbers()
	if err != nil {
		j.Close()
		return nil, nil, err
	}
	var found [][]*model.ModelCall
	for _, n := range nums {
		rows, err := readSegment(j.path(n))
		if err != nil {
			j.Close()
			return nil, nil, err
		}
		found = append(found, rows)
		j.segs = append(j.segs, segment{n: n})
		j.n = n
	}
	if err := j.rotate(); err != nil {
		j.Close()
		return nil, nil, err
	}
	return j, found, nil
}

// Recovered records the ticket of the last row of each segment openJournal
// found (in order; a segment with no rows has ticket 0 and goes at the
// first write).
func (j *Journal) Recovered(lasts []uint64) {
	for i, last := range lasts {
		j.segs[i].last = last
	}
}

func (j *Journal) path(n int) string { return filepath.Join(j.dir, fmt.Sprintf("calls-%08d.jsonl", n)) }

func (j *Journal) segmentNumbers() ([]int, error) {
	entries, err := os.ReadDir(j.dir)
	if err != nil {
		return nil, fmt.Errorf("gateway journal: %w", err)
	}
	var nums []int
	for _, e := range entries {
		name, ok := strings.CutPrefix(e.Name(), "calls-")
		if name, ok2 := strings.CutSuffix(name, ".jsonl"); ok && ok2 {
			if n, err := strconv.Atoi(name); err == nil {
				nums = append(nums, n)
			}
		}
	}
	slices.Sort(nums)
	return nums, nil
}

// readSegment reads a segment's rows; a last line cut short is left out.
func readSegment(path string) ([]*model.ModelCall, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("gateway journal: %w", err)
	}
	var rows []*model.ModelCall
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var c model.ModelCall
		if json.Unmarshal(sc.Bytes(), &c) != nil || c.ID == "" || c.TenantID == "" {
			continue // a torn line: its call had not been answered
		}
		rows = append(rows, &c)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("gateway journal %s: %w", path, err)
	}
	return rows, nil
}

// rotate closes the open segment and begins the next.
func (j *Journal) rotate() error {
	if j.f != nil {
		if err := j.f.Close(); err != nil {
			return fmt.Errorf("gateway journal: %w", err)
		}
		j.f = nil
	}
	f, err := os.OpenFile(j.path(j.n+1), os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("gateway journal: %w", err)
	}
	j.n++
	j.f, j.size = f, 0
	j.segs = append(j.segs, segment{n: j.n})
	return nil
}

// Append writes c's row, of ticket, to the open segment: one write(2).
func (j *Journal) Append(c *model.ModelCall, ticket uint64) error {
	if j.size >= segmentBytes {
		if err := j.rotate(); err != nil {
			return err
		}
	}
	j.line.Reset()
	if err := j.enc.Encode(c); err != nil {
		return fmt.Errorf("gateway journal: %w", err)
	}
	n, err := j.f.Write(j.line.Bytes())
	j.size += int64(n)
	if err != nil {
		return fmt.Errorf("gateway journal: %w", err)
	}
	j.segs[len(j.segs)-1].last = ticket
	return nil
}

// Durable removes the closed segments whose rows are all on the ledger
// (tickets up to durable), and with all set the open one's too: the
// gateway is closing and the ledger has every row.
func (j *Journal) Durable(durable uint64, all bool) error {
	var errs []error
	keep := j.segs[:0]
	for i, s := range j.segs {
		open := i == len(j.segs)-1
		if s.last <= durable && (!open || all) {
			if open {
				j.f.Close()
				j.f = nil
			}
			if err := os.Remove(j.path(s.n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
				keep = append(keep, s)
			}
			continue
		}
		keep = append(keep, s)
	}
	j.segs = keep
	return errors.Join(errs...)
}

// Close gives the directory up to the next process.
func (j *Journal) Close() {
	if j.f != nil {
		j.f.Close()
		j.f = nil
	}
	j.lock.Close() // closing the descriptor releases the flock
}
