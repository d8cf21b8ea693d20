package limits

import (
	"context"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// batcher sends script calls to Redis in pipelines: each of a few senders
// takes the next call and whatever else is already waiting, and sends them
// in one round trip. An idle gateway sends each call alone, at once; a
// busy one spends a write and a read on many calls instead of one each,
// which is what lets a Redis and a gateway on a few cores keep up.
type batcher struct {
	c    redis.UniversalClient
	reqs chan *scriptCall
	once sync.Once
}

// scriptCall is one script run waiting for its answer.
type scriptCall struct {
	ctx    context.Context
	script *redis.Script
	keys   []string
	args   []any
	res    any
	err    error
	done   chan struct{}
}

const (
	batchSenders = 4
	batchMax     = 128
)

var callPool = sync.Pool{New: func() any { return &scriptCall{done: make(chan struct{}, 1)} }}

// run sends one script call and waits for its answer.
func (b *batcher) run(ctx context.Context, s *redis.Script, keys []string, args []any) (any, error) {
	b.once.Do(func() {
		b.reqs = make(chan *scriptCall, 4096)
		for i := 0; i < batchSenders; i++ {
			go b.send()
		}
	})
	c := callPool.Get().(*scriptCall)
	c.ctx, c.script, c.keys, c.args, c.res, c.err = ctx, s, keys, args, nil, nil
	select {
	case b.reqs <- c:
	case <-ctx.Done():
		callPool.Put(c)
		return nil, ctx.Err()
	}
	<-c.done
	res, err := c.res, c.err
	c.ctx, c.keys, c.args, c.res = nil, nil, nil, nil
	callPool.Put(c)
	return res, err
}

// send is one sender's loop. Senders never stop: a limiter lives as long
// as its process.
func (b *batcher) send() {
	batch := make([]*scriptCall, 0, batchMax)
	cmds := make([]*redis.Cmd, 0, batchMax)
	for first := range b.reqs {
		batch = append(batch[:0], first)
	fill:
		for len(batch) < batchMax {
			select {
			case c := <-b.reqs:
				batch = append(batch, c)
			default:
				break fill
			}
		}
		if len(batch) == 1 {
			c := batch[0]
			c.res, c.err = c.script.Run(c.ctx, b.c, c.keys, c.args...).Result()
			c.done <- struct{}{}
			continue
		}
		pipe := b.c.Pipeline()
		cmds = cmds[:0]
		for _, c := range batch {
			cmds = append(cmds, c.script.EvalSha(context.Background(), pipe, c.keys, c.args...))
		}
		_, _ = pipe.Exec(context.Background())
		for i, c := range batch {
			c.res, c.err = cmds[i].Result()
			if c.err != nil && strings.HasPrefix(c.err.Error(), "NOSCRIPT") {
				// The script is not loaded yet (a Redis restarted): Run
				// loads it.
				c.res, c.err = c.script.Run(c.ctx, b.c, c.keys, c.args...).Result()
			}
			c.done <- struct{}{}
		}
	}
}
