package agent

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestWarmQueue: workers taking chunks at once get every chunk once, in
// order for each peer, never more than warmPerSource of one peer at a
// time; chunks that name no peer are not held back.
func TestWarmQueue(t *testing.T) {
	var todo []warmChunk
	srcs := []string{"a", "b", "", "a"}
	for i := range 200 {
		todo = append(todo, warmChunk{item: i % len(srcs), first: uint64(i)})
	}
	from := func(c warmChunk) string { return srcs[c.item] }
	q := newWarmQueue(context.Background(), todo, from)
	var (
		mu   sync.Mutex
		busy = map[string]int{}
		seen = map[uint64]bool{}
		wg   sync.WaitGroup
	)
	for range 8 {
		wg.Go(func() {
			for {
				c, ok := q.take(context.Background())
				if !ok {
					return
				}
				src := from(c)
				mu.Lock()
				busy[src]++
				if src != "" && busy[src] > warmPerSource {
					t.Errorf("%d chunks of peer %q at once", busy[src], src)
				}
				if seen[c.first] {
					t.Errorf("chunk %d handed out twice", c.first)
				}
				seen[c.first] = true
				busy[src]--
				mu.Unlock()
				q.done(c)
			}
		})
	}
	wg.Wait()
	if len(seen) != len(todo) {
		t.Fatalf("%d chunks handed out, want %d", len(seen), len(todo))
	}
	// One worker: each peer's chunks come in order.
	q = newWarmQueue(context.Background(), todo, from)
	last := map[string]int{}
	for c, ok := q.take(context.Background()); ok; c, ok = q.take(context.Background()) {
		if src := from(c); int(c.first) < last[src] {
			t.Fatalf("chunk %d of %q after %d", c.first, src, last[src])
		}
		last[from(c)] = int(c.first)
		q.done(c)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok := newWarmQueue(ctx, todo, from).take(ctx); ok {
		t.Fatal("a chunk handed out after the context ended")
	}
}

// TestPeerTimeoutPatient: a warm-up's reads give a peer warmPatience
// times the forward timeout; other reads the timeout itself.
func TestPeerTimeoutPatient(t *testing.T) {
	ctx := context.Background()
	if got := peerTimeout(ctx, 5*time.Second); got != 5*time.Second {
		t.Errorf("a read: %v, want 5s", got)
	}
	if got := peerTimeout(patient(ctx), 5*time.Second); got != warmPatience*5*time.Second {
		t.Errorf("a warm-up's read: %v, want %v", got, warmPatience*5*time.Second)
	}
}
