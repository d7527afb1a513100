package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coopfs/coopfs/internal/wire"
)

// Callbacks (AFS's callbacks, NFSv4's delegations): the one mechanism by
// which the server promises a client to tell it before what it cached
// stops being true.
//
// A client that sent CallbackRegister on its connection holds a callback on
// every object (inode) the server hands it: the object of a Lookup,
// GetAttr or Open, a listed directory and every entry of a ReadDirPlus. A
// callback on a file (kind CallbackRead) covers its attributes and data; on
// a directory (CallbackDir), its attributes and its entries. Any change of
// an object — through another client, or made directly in the export and
// noticed by the server (watch.go) — breaks the callbacks on it: the
// server sends every holder but the changer a CallbackBreak and waits for
// the acks before the changing request is answered. A file's break
// revokes: the holder holds nothing on it afterwards until it fetches it
// again (one break per burst of writes, not one per write). A directory's
// does not: the holder's kernel keeps the names it looked up in it for
// long, so it must hear of every later change of the directory too (each
// break names the entry that changed).
//
// The API, for the features built on it:
//
//   - grant(client, seq, objs...) records holders. seq is begin()'s
//     value, taken BEFORE the state handed out was read: a break between
//     that read and the grant is detected and answered with a break to the
//     grantee (it may hold stale data), so grants and changes never race.
//   - Break(ctx, items, except) breaks the callbacks of every holder of the
//     items' objects except the changer, and returns when every holder
//     acked or the bound (Config.CallbackTimeout) passed; a holder that did
//     not ack in time is disconnected, which drops everything it held (its
//     client treats a lost connection as every callback broken).
//   - Kinds: wire.CallbackDir and CallbackRead are "drop what you
//     cached" (the first stays granted, the second is revoked). A write
//     delegation (wire.CallbackWrite, for write-back) is granted the same
//     way; its break is sent with Kind CallbackWrite and means "flush the
//     file, then ack": Break already waits for the ack, so the writer's
//     flush reaches the server before the breaking request is answered. A
//     holder's kind is the strongest it was granted; a break message
//     carries the strongest kind among the holder's broken grants. What
//     write-back adds: grant CallbackWrite where a client opens for
//     writing (serveCallbacks, handsOut), and before serving another
//     client's open or read of that object, Break it (the reader's own
//     grant comes after, so it sees the flushed data); the agent's
//     serveBreak flushes the file before it acks a CallbackWrite break.
//     The holder's flush goes through serveCallbacks like any write and
//     breaks nobody waiting (the breaker holds nothing on the file yet).
//     Granting a write delegation must also Break the other clients' read
//     callbacks on the file (else their opens are answered from their
//     caches, without the open that recalls the data); the table already
//     refuses read callbacks on a file delegated to another client.
//
// A grant's state may be read before a break and recorded after it; the
// table's break sequence numbers catch that and the grantee is sent a
// break of its own (for a directory, of all its entries).
//
// The table (cbTable) is an I/O-free core; callbacks wraps it with the
// connections, the lock and the timing.

// cbTable is who holds a callback on which object.
//
// INVARIANT: held[c] == the number of objects o with holders[o][c] set,
// and no holders[o] is an empty map.
type cbTable struct {
	holders map[uint64]map[uint32]uint8 // object → client → strongest kind granted
	held    map[uint32]int              // client → objects it holds
	// broke[o] is the break sequence number of the last break of o, made
	// by client brokeBy[o] (0: a change made directly in the export);
	// before[o] that of the last break by any other. floor is the oldest
	// sequence broke still describes (older entries were forgotten to
	// bound it).
	broke   map[uint64]uint64
	brokeBy map[uint64]uint32
	before  map[uint64]uint64
	seq     uint64
	floor   uint64
	max     int // objects one client may hold; past it, it is broken entirely
}

// maxBrokeMemory bounds cbTable.broke; past it the table forgets and raises
// its floor (grants that began before are treated as raced).
const maxBrokeMemory = 1 << 16

func newCBTable(maxPerClient int) *cbTable {
	return &cbTable{holders: make(map[uint64]map[uint32]uint8), held: make(map[uint32]int),
		broke: make(map[uint64]uint64), brokeBy: make(map[uint64]uint32), before: make(map[uint64]uint64), max: maxPerClient}
}

// grantResult says what a grant needs besides being recorded.
type grantResult struct {
	overflow bool             // the client holds too many: break all it holds
	raced    []wire.BreakItem // objects broken since the grant's state was read
}

// grantObj is one object a reply hands out, with the kind it is granted.
type grantObj struct {
	ino  uint64
	kind uint8
}

// grant records client as a holder of objs, for state read after sequence
// number since.
func (t *cbTable) grant(client uint32, since uint64, objs ...grantObj) grantResult {
	var r grantResult
	for _, ob := range objs {
		o, kind := ob.ino, ob.kind
		if o == 0 {
			continue
		}
		if t.brokeByOthers(o, client) > since || since < t.floor || t.delegatedElsewhere(o, client) {
			it := wire.BreakItem{Ino: o}
			if kind == wire.CallbackDir {
				it.Name = wire.BreakEntries
			}
			r.raced = append(r.raced, it)
		}
		h := t.holders[o]
		if h == nil {
			h = make(map[uint32]uint8, 1)
			t.holders[o] = h
		}
		if k, ok := h[client]; !ok {
			h[client] = kind
			t.held[client]++
		} else if kind > k {
			h[client] = kind
		}
	}
	r.overflow = t.max > 0 && t.held[client] > t.max
	return r
}

// brokeByOthers is the sequence number of the last break of o that client
// did not make: a grant's state read before it is stale. (The client's
// own changes raced with its grants need no break: it knows of them, and
// orders them with what it caches itself.)
func (t *cbTable) brokeByOthers(o uint64, client uint32) uint64 {
	if t.brokeBy[o] != client || client == 0 {
		return t.broke[o]
	}
	return t.before[o]
}

// delegatedElsewhere reports whether another client than client holds a
// write delegation on o: a read callback granted then would let the
// grantee open from its cache without the open that recalls the writer's
// data, so it is answered by a break at once (as a raced grant).
func (t *cbTable) delegatedElsewhere(o uint64, client uint32) bool {
	for c, k := range t.holders[o] {
		if c != client && k == wire.CallbackWrite {
			return true
		}
	}
	return false
}

// take returns, per holder of the items' objects other than except, the
// items it held and the highest kind among them, and revokes the file
// callbacks among them.
func (t *cbTable) take(items []wire.BreakItem, except uint32) map[uint32]*wire.CallbackBreak {
	t.seq++
	out := make(map[uint32]*wire.CallbackBreak)
	for _, it := range items {
		t.noteBroken(it.Ino, except)
		var taken []uint32
		for c, k := range t.holders[it.Ino] {
			if c == except {
				continue
			}
			if k != wire.CallbackDir {
				taken = append(taken, c) // a directory's callback stays
			}
			b := out[c]
			if b == nil {
				b = &wire.CallbackBreak{Cause: except}
				out[c] = b
			}
			b.Items = append(b.Items, it)
			b.Kind = max(b.Kind, k)
		}
		for _, c := range taken {
			t.remove(it.Ino, c)
		}
	}
	return out
}

// noteBroken records a break of o made by client by (0: nobody's).
func (t *cbTable) noteBroken(o uint64, by uint32) {
	if len(t.broke) >= maxBrokeMemory {
		clear(t.broke)
		clear(t.brokeBy)
		clear(t.before)
		t.floor = t.seq
	}
	if last, ok := t.brokeBy[o]; ok && last != by {
		t.before[o] = t.broke[o]
	}
	t.broke[o] = t.seq
	t.brokeBy[o] = by
}

func (t *cbTable) remove(o uint64, c uint32) {
	h := t.holders[o]
	delete(h, c)
	if len(h) == 0 {
		delete(t.holders, o)
	}
	if t.held[c]--; t.held[c] <= 0 {
		delete(t.held, c)
	}
}

// dropClient forgets everything client holds and returns how much that was.
func (t *cbTable) dropClient(client uint32) int {
	n := t.held[client]
	if n == 0 {
		return 0
	}
	for o, h := range t.holders {
		if _, ok := h[client]; ok {
			t.remove(o, client)
		}
	}
	return n
}

// check verifies the table's invariant (tests).
func (t *cbTable) check() error {
	count := make(map[uint32]int)
	for o, h := range t.holders {
		if len(h) == 0 {
			return fmt.Errorf("object %d has an empty holder set", o)
		}
		for c := range h {
			count[c]++
		}
	}
	if len(count) != len(t.held) {
		return fmt.Errorf("%d clients hold callbacks, held counts %d", len(count), len(t.held))
	}
	for c, n := range count {
		if t.held[c] != n {
			return fmt.Errorf("client %d holds %d, counted %d", c, n, t.held[c])
		}
	}
	return nil
}

// callbacks is the server's callback service: the table, the registered
// clients' connections and the break protocol.
type callbacks struct {
	log     *slog.Logger
	timeout time.Duration // how long a break waits for a holder's ack

	mu    sync.Mutex
	t     *cbTable
	conns map[uint32]*wire.Conn // registered clients
	// beforeDrop, if set, is called with mu held before a client's
	// callbacks are forgotten (recall.go keeps its write delegations).
	beforeDrop func(client uint32)
	// elsewhere, if set, reports an object another client than the
	// grantee holds a delegation of (dirdeleg.go): grants of it are
	// answered by a break, as raced ones are.
	elsewhere func(ino uint64, client uint32) bool

	// counters for /metrics
	grants, breaksSent, breakTimeouts, races atomic.Int64
}

func newCallbacks(log *slog.Logger, timeout time.Duration, maxPerClient int) *callbacks {
	return &callbacks{log: log, timeout: timeout, t: newCBTable(maxPerClient), conns: make(map[uint32]*wire.Conn)}
}

// register makes client a callback holder on connection c.
func (cb *callbacks) register(client uint32, c *wire.Conn) {
	cb.mu.Lock()
	cb.conns[client] = c
	cb.mu.Unlock()
}

// left forgets a client whose connection ended.
func (cb *callbacks) left(client uint32) {
	cb.mu.Lock()
	cb.dropLocked(client)
	cb.mu.Unlock()
}

// dropLocked forgets client and everything it holds (beforeDrop first).
func (cb *callbacks) dropLocked(client uint32) {
	delete(cb.conns, client)
	if cb.beforeDrop != nil {
		cb.beforeDrop(client)
	}
	cb.t.dropClient(client)
}

// disconnect drops client, whose connection c did not acknowledge a break
// in time, unless it has reconnected since, and closes c.
func (cb *callbacks) disconnect(client uint32, c *wire.Conn) {
	cb.breakTimeouts.Add(1)
	cb.mu.Lock()
	if cb.conns[client] == c {
		cb.dropLocked(client)
	}
	cb.mu.Unlock()
	c.Close()
}

// registered reports whether client registered for callbacks.
func (cb *callbacks) registered(client uint32) bool {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	return cb.conns[client] != nil
}

// active reports whether any client is registered (when none is, requests
// need not compute what they would break).
func (cb *callbacks) active() bool {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	return len(cb.conns) > 0
}

// begin returns the sequence number to pass to grant; take it before
// reading the state the grant covers.
func (cb *callbacks) begin() uint64 {
	cb.mu.Lock()
	defer cb.mu.Unlock()
	return cb.t.seq
}

// grant records that client holds callbacks on objs (a client that
// did not register holds none). A grant that raced with a break (the
// objects changed after since), or on an object another client holds a
// write delegation on, is followed by a break to the client, acked before
// grant returns (so before the reply is sent): the client does not cache
// what the reply hands out.
func (cb *callbacks) grant(ctx context.Context, client uint32, since uint64, objs ...grantObj) {
	cb.mu.Lock()
	c := cb.conns[client]
	if c == nil {
		cb.mu.Unlock()
		return
	}
	r := cb.t.grant(client, since, objs...)
	if cb.elsewhere != nil {
		for _, o := range objs {
			if o.kind == wire.CallbackDir && cb.elsewhere(o.ino, client) {
				r.raced = append(r.raced, wire.BreakItem{Ino: o.ino, Name: wire.BreakEntries})
			}
		}
	}
	var all bool
	if r.overflow {
		cb.t.dropClient(client)
		all = true
	}
	cb.mu.Unlock()
	cb.grants.Add(int64(len(objs)))
	switch {
	case all:
		cb.log.Info("a client holds too many callbacks: breaking them all", "client", client)
		go cb.send(context.Background(), client, c, &wire.CallbackBreak{Kind: wire.CallbackRead, All: true})
	case len(r.raced) > 0:
		// Acked before the reply goes out: the client then never uses
		// what the reply hands out as covered (a break sent after the
		// reply could reach it after it used the reply).
		// The ack comes on the request's own connection: an inline
		// request hands the reading over first.
		cb.races.Add(1)
		wire.HandOver(ctx)
		cb.send(ctx, client, c, &wire.CallbackBreak{Kind: wire.CallbackRead, Items: r.raced})
	}
}

// grantWatched is grant for state whose directory may not be watched (the
// watch limit): then the grant is answered by a break at once, as a raced
// one is, and the client caches nothing of it.
func (cb *callbacks) grantWatched(ctx context.Context, client uint32, since uint64, watched bool, objs ...grantObj) {
	if !watched {
		since = 0
		cb.mu.Lock()
		cb.t.seq++
		cb.t.floor = cb.t.seq // every grant below counts as raced
		for _, o := range objs {
			cb.t.noteBroken(o.ino, 0)
		}
		cb.mu.Unlock()
	}
	cb.grant(ctx, client, since, objs...)
}

// breakAll breaks every callback of every client (the export watch lost
// events).
func (cb *callbacks) breakAll() {
	cb.mu.Lock()
	conns := make(map[uint32]*wire.Conn, len(cb.conns))
	for id, c := range cb.conns {
		conns[id] = c
		cb.t.dropClient(id)
	}
	cb.t.seq++
	clear(cb.t.broke)
	clear(cb.t.brokeBy)
	clear(cb.t.before)
	cb.t.floor = cb.t.seq
	cb.mu.Unlock()
	var wg sync.WaitGroup
	for id, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cb.send(context.Background(), id, c, &wire.CallbackBreak{Kind: wire.CallbackRead, All: true})
		}()
	}
	wg.Wait()
}

// Break breaks the callbacks on the items' objects of every holder but
// except (the client making the change; 0 for none) and returns once every
// holder acked, or was disconnected for not acking within the timeout.
func (cb *callbacks) Break(ctx context.Context, items []wire.BreakItem, except uint32) {
	if len(items) == 0 {
		return
	}
	cb.mu.Lock()
	msgs := cb.t.take(items, except)
	conns := make(map[uint32]*wire.Conn, len(msgs))
	for c := range msgs {
		conns[c] = cb.conns[c]
	}
	cb.mu.Unlock()
	if len(msgs) == 0 {
		return
	}
	wire.HandOver(ctx) // an inline request waits for other clients from here
	var wg sync.WaitGroup
	for client, m := range msgs {
		c := conns[client]
		if c == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cb.send(ctx, client, c, m)
		}()
	}
	wg.Wait()
}

// send delivers one break and waits for its ack; a holder that does not ack
// within the timeout is disconnected (and so loses all it holds).
func (cb *callbacks) send(ctx context.Context, client uint32, c *wire.Conn, m *wire.CallbackBreak) {
	cb.breaksSent.Add(1)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cb.timeout)
	defer cancel()
	_, err := c.Call(cctx, m)
	if err == nil || c.Err() != nil {
		return // acked, or the connection is gone already (it held nothing then)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		// An answer, if not an ack (a client that registered knows breaks).
		cb.log.Warn("a client answered a callback break with an error", "client", client, "err", err)
		return
	}
	cb.log.Warn("a client did not acknowledge a callback break in time: disconnecting it",
		"client", client, "timeout", cb.timeout.String(), "err", err)
	cb.disconnect(client, c)
}
