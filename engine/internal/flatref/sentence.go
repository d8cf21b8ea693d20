package flatref

import (
	"slices"
	"strconv"
	"time"

	"github.com/klique-ai/klique/internal/model"
)

// Why-waiting sentences are written in two steps. The pass first describes
// a sentence as the sequence of its parts: its fixed text and its values
// (GPUs, budget hours, times), unformatted. Only then is the sentence
// written, by formatting each part in turn. A pass over a stuck estate says
// why ten thousand heads wait, most of them for the same reason as in the
// pass before, and formatting was most of such a pass. A loop that keeps
// the previous pass's Reasons lets the pass compare the parts of each
// sentence with the ones kept for the same queue, and reuse the old
// sentence when they are equal: equal parts write equal text, so the reuse
// is exact, whatever changed elsewhere in the estate.

// partKind says how a part is written.
type partKind uint8

const (
	partText     partKind = iota // s as it is
	partGPUs                     // n milli-GPUs, as MilliGPU.String
	partHours                    // n micro budget-hours, as FormatMicroHours
	partDuration                 // n as a time.Duration
	partReset                    // n Unix seconds, as a budget reset (resetText)
	partSeen                     // n Unix seconds, as a worker last seen
	partShape                    // a model.Size of n nodes of m milli-GPUs
	// partNoPoolCanRun starts a sentence that model.NoPoolCanRun writes:
	// a text (the profile), a shape, then a text pair (name, kind) per
	// pool.
	partNoPoolCanRun
)

// part is one part of a sentence. Parts are compared with ==; a text part
// is usually a constant or a name from the snapshot, which == finds equal
// by its pointer before reading its bytes.
type part struct {
	kind partKind
	s    string
	n, m int64
}

// sentence collects the parts of one sentence, or, in compare mode,
// compares them with earlier ones as they come without keeping them.
type sentence struct {
	compare bool
	// prev are the parts compared with, at the index of the next part;
	// same says every part so far was equal.
	prev []part
	at   int
	same bool
	// parts are the parts collected (record mode).
	parts []part
	// buf is reused to write each sentence.
	buf []byte
}

// compareWith starts a sentence compared with prev.
func (w *sentence) compareWith(prev []part) {
	w.compare, w.prev, w.at, w.same = true, prev, 0, true
}

// record starts a sentence whose parts are kept.
func (w *sentence) record() {
	w.compare, w.parts = false, w.parts[:0]
}

// matched reports whether a sentence in compare mode had exactly the parts
// it was compared with.
func (w *sentence) matched() bool {
	return w.same && w.at == len(w.prev)
}

func (w *sentence) add(p part) *sentence {
	if !w.compare {
		w.parts = append(w.parts, p)
		return w
	}
	if w.same && (w.at >= len(w.prev) || w.prev[w.at] != p) {
		w.same = false
	}
	w.at++
	return w
}

func (w *sentence) text(s string) *sentence         { return w.add(part{kind: partText, s: s}) }
func (w *sentence) gpus(v model.MilliGPU) *sentence { return w.add(part{kind: partGPUs, n: int64(v)}) }
func (w *sentence) hours(v int64) *sentence         { return w.add(part{kind: partHours, n: v}) }
func (w *sentence) duration(d time.Duration) *sentence {
	return w.add(part{kind: partDuration, n: int64(d)})
}
func (w *sentence) reset(t time.Time) *sentence { return w.add(part{kind: partReset, n: t.Unix()}) }
func (w *sentence) seen(t time.Time) *sentence  { return w.add(part{kind: partSeen, n: t.Unix()}) }
func (w *sentence) shape(s model.Size) *sentence {
	return w.add(part{kind: partShape, n: int64(s.Nodes), m: int64(s.PerNode)})
}
func (w *sentence) kindOf(k partKind) *sentence         { return w.add(part{kind: k}) }
func (w *sentence) gpusText(v model.MilliGPU) *sentence { return w.gpus(v).text(" GPUs") }

// render writes the sentence recorded.
func (w *sentence) render() string {
	w.buf = appendParts(w.buf[:0], w.parts)
	return string(w.buf)
}

// appendParts writes parts after buf.
func appendParts(buf []byte, parts []part) []byte {
	if len(parts) > 0 && parts[0].kind == partNoPoolCanRun {
		names := make([]string, 0, len(parts)/2)
		kinds := make([]model.PoolKind, 0, len(parts)/2)
		for i := 3; i+1 < len(parts); i += 2 {
			names, kinds = append(names, parts[i].s), append(kinds, model.PoolKind(parts[i+1].s))
		}
		shape := model.Size{Nodes: int(parts[2].n), PerNode: model.MilliGPU(parts[2].m)}
		return append(buf, model.NoPoolCanRun(parts[1].s, shape, names, kinds)...)
	}
	for _, p := range parts {
		switch p.kind {
		case partText:
			buf = append(buf, p.s...)
		case partGPUs:
			buf = strconv.AppendFloat(buf, model.MilliGPU(p.n).Float(), 'f', -1, 64)
		case partHours:
			buf = appendMicroHours(buf, p.n)
		case partDuration:
			buf = append(buf, time.Duration(p.n).String()...)
		case partReset:
			buf = time.Unix(p.n, 0).UTC().AppendFormat(buf, resetLayout)
		case partSeen:
			buf = time.Unix(p.n, 0).UTC().AppendFormat(buf, seenLayout)
		case partShape:
			buf = append(buf, model.Size{Nodes: int(p.n), PerNode: model.MilliGPU(p.m)}.String()...)
		}
	}
	return buf
}

const (
	resetLayout = "Monday 2006-01-02 15:04 UTC"
	seenLayout  = "2006-01-02 15:04:05 UTC"
)

// appendMicroHours writes micro budget-hours as FormatMicroHours does.
func appendMicroHours(buf []byte, v int64) []byte {
	if v < 0 {
		buf = append(buf, '-')
		v = -v
	}
	whole, frac := v/1_000_000, v%1_000_000
	buf = strconv.AppendInt(buf, whole, 10)
	if frac == 0 {
		return buf
	}
	var digits [6]byte
	for i := 5; i >= 0; i-- {
		digits[i] = byte('0' + frac%10)
		frac /= 10
	}
	end := 6
	for digits[end-1] == '0' {
		end--
	}
	return append(append(buf, '.'), digits[:end]...)
}

// FormatMicroHours writes micro budget-hours as hours, exactly and as
// short as that allows ("2000", "0.015", "0.000001"): a budget reads as it
// was set, and a small one never rounds to 0.
func FormatMicroHours(v int64) string {
	return string(appendMicroHours(nil, v))
}

// Reasons are the why-waiting sentences of one pass, each kept with the
// parts it was written from, so that the next pass writes only the ones
// whose parts changed (PassReusing). They are read-only once returned:
// passes share their entries.
type Reasons struct {
	// byQueue is indexed by queue in the pass's snapshot; an entry with
	// an empty queue id is a queue with nothing waiting.
	byQueue []reasonEntry
	// Rendered is how many sentences the pass wrote; the rest it took
	// from the previous pass's Reasons.
	Rendered int
}

type reasonEntry struct {
	// queue is the queue's id: a queue's index may change with the
	// estate, so an entry is reused only for the same id.
	queue      string
	constraint Constraint
	parts      []part
	reason     string
}

// entry is the kept reason of queue q with id id, or nil.
func (r *Reasons) entry(q int, id string) *reasonEntry {
	if r == nil || q >= len(r.byQueue) || r.byQueue[q].queue != id {
		return nil
	}
	return &r.byQueue[q]
}

// reason says why the head of queue q, of size shape, waits: the previous
// pass's sentence when its parts are the same, a new one otherwise.
func (st *state) reason(q int, shape model.Size) (Constraint, string) {
	queue := &st.s.Queues[q]
	w := &st.sentence
	if e := st.prev.entry(q, queue.ID); e != nil {
		w.compareWith(e.parts)
		if c := st.why(queue, shape, w); c == e.constraint && w.matched() {
			st.out.byQueue[q] = *e
			return c, e.reason
		}
	}
	w.record()
	c := st.why(queue, shape, w)
	reason := w.render()
	if st.out != nil {
		st.out.Rendered++
		st.out.byQueue[q] = reasonEntry{queue: queue.ID, constraint: c, parts: slices.Clone(w.parts), reason: reason}
	}
	return c, reason
}
