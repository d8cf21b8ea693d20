package events

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisChannel is the Redis pub/sub channel replicas exchange events on.
const RedisChannel = "klique:events"

// envelope is an event on the wire, with the replica it comes from so that
// a replica does not deliver its own events twice.
type envelope struct {
	Origin string `json:"o"`
	Event  Event  `json:"e"`
}

// Bridge carries a bus's events to the other replicas over Redis pub/sub,
// and theirs to it. With several replicas behind a load balancer, the one
// that runs the engine publishes the placements; a dashboard connected to
// another replica sees them through the bridge.
//
// Publishing never waits for Redis: events go through a bounded queue that
// one goroutine writes out. When Redis is slower than the control plane the
// queue's overflow is dropped and counted, like a slow subscriber's; the
// subscriptions built on the bus send snapshots, so the next event brings
// the other replicas up to date.
type Bridge struct {
	bus     *Bus
	client  *redis.Client
	channel string
	origin  string
	log     *slog.Logger
	out     chan Event
	pubsub  *redis.PubSub
	cancel  context.CancelFunc
	done    sync.WaitGroup
	mu      sync.Mutex
	dropped uint64
}

// BridgeRedis connects bus to the other replicas through client on
// channel (RedisChannel when empty). It returns once the subscription is in
// place, so that no event published after it is missed. Close stops it; it
// does not close client.
func BridgeRedis(ctx context.Context, bus *Bus, client *redis.Client, channel string, log *slog.Logger) (*Bridge, error) {
	if channel == "" {
		channel = RedisChannel
	}
	if log == nil {
		log = slog.Default()
	}
	id := make([]byte, 8)
	if _, err := rand.Read(id); err != nil {
		return nil, fmt.Errorf("event bridge: replica id: %w", err)
	}
	ps := client.Subscribe(ctx, channel)
	// Receive waits for Redis to confirm the subscription.
	if _, err := ps.Receive(ctx); err != nil {
		_ = ps.Close()
		return nil, fmt.Errorf("event bridge: subscribe to Redis channel %s: %w", channel, err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	b := &Bridge{bus: bus, client: client, channel: channel, origin: hex.EncodeToString(id), log: log,
		out: make(chan Event, 4096), pubsub: ps, cancel: cancel}
	b.done.Add(2)
	go b.write(runCtx)
	go b.read(ps.Channel(redis.WithChannelSize(4096)))
	f := b.enqueue
	bus.forward.Store(&f)
	return b, nil
}

// enqueue queues e for Redis without waiting.
func (b *Bridge) enqueue(e Event) {
	select {
	case b.out <- e:
	default:
		b.mu.Lock()
		b.dropped++
		n := b.dropped
		b.mu.Unlock()
		if n == 1 || n%1000 == 0 {
			b.log.Warn("event bridge: Redis is not keeping up; events for other replicas dropped", "dropped", n)
		}
	}
}

func (b *Bridge) write(ctx context.Context) {
	defer b.done.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-b.out:
			data, err := json.Marshal(envelope{Origin: b.origin, Event: e})
			if err != nil {
				b.log.Error("event bridge: encode event", "kind", e.Kind, "err", err)
				continue
			}
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err = b.client.Publish(pctx, b.channel, data).Err()
			cancel()
			if err != nil && !errors.Is(err, context.Canceled) {
				b.log.Warn("event bridge: publish to Redis", "kind", e.Kind, "err", err)
			}
		}
	}
}

func (b *Bridge) read(msgs <-chan *redis.Message) {
	defer b.done.Done()
	for m := range msgs {
		var env envelope
		if err := json.Unmarshal([]byte(m.Payload), &env); err != nil {
			b.log.Warn("event bridge: a message on the events channel is not an event", "err", err)
			continue
		}
		if env.Origin == b.origin {
			continue
		}
		b.bus.deliver(env.Event)
	}
}

// Dropped returns how many events could not be sent to the other replicas
// because Redis did not keep up.
func (b *Bridge) Dropped() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.dropped
}

// Close stops forwarding and receiving. Events still queued are not sent.
func (b *Bridge) Close() error {
	b.bus.forward.Store(nil)
	b.cancel()
	err := b.pubsub.Close()
	b.done.Wait()
	if err != nil {
		return fmt.Errorf("event bridge: close Redis subscription: %w", err)
	}
	return nil
}
