package directory

import (
	"slices"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/block"
)

func newDir(t *testing.T, cfg Config) *Directory {
	t.Helper()
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func newHolder(t *testing.T, cfg HolderConfig) *Holder {
	t.Helper()
	h, err := NewHolder(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

var (
	b0 = block.ID{File: 7, Index: 0}
	b1 = block.ID{File: 7, Index: 1}
	c0 = block.ID{File: 9, Index: 0}
)

func wantAct(t *testing.T, got Action, kind Kind, to ClientID) {
	t.Helper()
	if got.Kind != kind || (kind == ActForward && got.To != to) {
		t.Fatalf("action = %+v, want %v to %d", got, kind, to)
	}
}

// Scenario 1 and 2 of seed 000, and the fan-out of concurrent requests that
// the optimistic update allows: every requester becomes a holder at once,
// and the forwards rotate among the holders.
func TestConcurrentRequestsFanOut(t *testing.T) {
	d := newDir(t, Config{})
	wantAct(t, d.Request(0, 1, b0, 1), ActServe, 0)
	// 2, 3, 4, 5 ask at once, before anyone has the data: each is forwarded
	// to an earlier requester, round-robin over the growing holder set.
	var tos []ClientID
	for c := ClientID(2); c <= 5; c++ {
		a := d.Request(0, c, b0, 1)
		if a.Kind != ActForward || a.Version != 1 || a.Client != c {
			t.Fatalf("request from %d: %+v, want a forward with version 1", c, a)
		}
		if a.To == c || a.To >= c {
			t.Fatalf("request from %d forwarded to %d: not an earlier requester", c, a.To)
		}
		tos = append(tos, a.To)
	}
	if want := []ClientID{1, 2, 3, 4}; !slices.Equal(tos, want) {
		t.Fatalf("forward targets = %v, want %v (rotation over the growing holder set)", tos, want)
	}
	if got := d.Holders(b0); !slices.Equal(got, []ClientID{1, 2, 3, 4, 5}) {
		t.Fatalf("holders = %v, want all five requesters", got)
	}
	// the rotation goes on from the last one forwarded to, skipping the requester
	var next []ClientID
	for range 5 {
		next = append(next, d.Request(0, 6, b0, 1).To)
	}
	if want := []ClientID{5, 1, 2, 3, 4}; !slices.Equal(next, want) {
		t.Fatalf("rotation = %v, want %v", next, want)
	}
	s := d.Stats()
	if s.Forwards != 9 || s.ServedByServer != 1 || s.Entries != 1 {
		t.Fatalf("stats = %+v, want 9 forwards, 1 served, 1 entry", s)
	}
}

// The server takes part in the rotation while the block is in its memory.
func TestServerInRotation(t *testing.T) {
	d := newDir(t, Config{})
	d.ServerCached(b0)
	a := d.Request(0, 1, b0, 1)
	if a.Kind != ActServe || !a.FromMemory {
		t.Fatalf("first request: %+v, want served from memory", a)
	}
	var seq []Action
	for range 4 {
		seq = append(seq, d.Request(0, 2, b0, 1))
	}
	// holders {1,2}; requester 2 is skipped: server, 1, server, 1
	if seq[0].To != 1 || seq[1].Kind != ActServe || !seq[1].FromMemory || seq[2].To != 1 || seq[3].Kind != ActServe {
		t.Fatalf("rotation = %+v, want 1, server, 1, server", seq)
	}
	d.ServerEvicted(b0)
	for range 3 {
		wantAct(t, d.Request(0, 2, b0, 1), ActForward, 1)
	}
	if s := d.Stats(); s.ServedFromMemory != 3 {
		t.Fatalf("served from memory = %d, want 3", s.ServedFromMemory)
	}
}

// A forward to a client whose block is pending: it waits, then sends.
func TestForwardToPendingHolder(t *testing.T) {
	d := newDir(t, Config{})
	h1 := newHolder(t, HolderConfig{})
	wantAct(t, d.Request(0, 1, b0, 3), ActServe, 0) // 1's data is on its way
	a := d.Request(0, 2, b0, 3)
	wantAct(t, a, ActForward, 1)
	r := h1.Forward(a.Block, a.Version, Local{Pending, 3})
	if r.Answer != Wait || r.DropFile || r.Notify != nil {
		t.Fatalf("pending holder: %+v, want wait", r)
	}
	// the data arrives; the client asks again
	if r := h1.Forward(a.Block, a.Version, Local{Present, 3}); r.Answer != Send {
		t.Fatalf("after arrival: %+v, want send", r)
	}
	// the fetch failed instead: negative, and the requester retries
	if r := h1.Forward(a.Block, a.Version, Local{Absent, 0}); r.Answer != Negative {
		t.Fatalf("after a failed fetch: %+v, want negative", r)
	}
	if s := h1.Stats(); s.Waited != 1 || s.Sent != 1 || s.Misses != 1 || s.Forwards != 3 {
		t.Fatalf("holder stats = %+v", s)
	}
}

// A forward to a client that dropped the block: negative reply with an
// on-demand discard notification; the requester retries; the server serves,
// drops the stale holder and counts the miss.
func TestForwardToHolderThatDropped(t *testing.T) {
	d := newDir(t, Config{})
	h1 := newHolder(t, HolderConfig{QueueLen: 10})
	d.Request(0, 1, b0, 1)
	d.Request(0, 1, b1, 1)
	// 1 evicts b0 and b1; the queue is not full, so the server does not know
	if h1.Evicted(b0) != nil || h1.Evicted(b1) != nil {
		t.Fatal("queue flushed before it was full")
	}
	a := d.Request(time.Second, 2, b0, 1)
	wantAct(t, a, ActForward, 1)
	r := h1.Forward(a.Block, a.Version, Local{})
	if r.Answer != Negative || r.DropFile {
		t.Fatalf("reply = %+v, want negative", r)
	}
	if !slices.Contains(r.Notify, b0) || !slices.Contains(r.Notify, b1) {
		t.Fatalf("on-demand notification = %v, want the queue (b0, b1)", r.Notify)
	}
	// the retry (after the negative reply) names the holder
	rt := d.Retry(time.Second, 2, b0, 1, 1)
	if rt.Kind != ActServe || rt.Ping != 0 {
		t.Fatalf("retry = %+v, want serve, no ping", rt)
	}
	d.Discarded(1, r.Notify)
	if got := d.Holders(b0); !slices.Equal(got, []ClientID{2}) {
		t.Fatalf("holders of b0 = %v, want [2]", got)
	}
	if got := d.Holders(b1); got != nil {
		t.Fatalf("holders of b1 = %v, want none", got)
	}
	cs, _ := d.ClientStats(1)
	if cs.Misses != 1 || cs.Forwards != 1 {
		t.Fatalf("client 1 stats = %+v, want 1 forward, 1 miss", cs)
	}
	if s := d.Stats(); s.ForwardMisses != 1 || s.Retries != 1 || s.ServedByServer != 3 {
		t.Fatalf("stats = %+v", s)
	}
	if s := h1.Stats(); s.OnDemand != 1 || s.Batched != 0 || s.NotifiedBlocks != 2 || s.Queued != 0 {
		t.Fatalf("holder stats = %+v", s)
	}
}

// A retry after a timeout does not know the holder: the directory remembers
// where it forwarded the request (the seed's request cache).
func TestRetryAfterTimeoutBlamesRememberedHolder(t *testing.T) {
	d := newDir(t, Config{ForwardTTL: 10 * time.Second})
	d.Request(0, 1, b0, 1)
	wantAct(t, d.Request(time.Second, 2, b0, 1), ActForward, 1)
	d.Retry(3*time.Second, 2, b0, 1, NoClient)
	if cs, _ := d.ClientStats(1); cs.Misses != 1 {
		t.Fatalf("misses of 1 = %d, want 1", cs.Misses)
	}
	if got := d.Holders(b0); !slices.Equal(got, []ClientID{2}) {
		t.Fatalf("holders = %v, want [2]", got)
	}
	// a forward remembered for longer than the TTL is not blamed
	d.Request(20*time.Second, 3, b0, 1)
	d.Retry(40*time.Second, 3, b0, 1, NoClient)
	if cs, _ := d.ClientStats(2); cs.Misses != 0 {
		t.Fatalf("misses of 2 = %d, want 0 (forward too old to blame)", cs.Misses)
	}
}

// With NoForwardMemory nothing is remembered: a retry that names the
// holder blames it as always, one that does not blames no one.
func TestNoForwardMemory(t *testing.T) {
	d := newDir(t, Config{ForwardMemory: NoForwardMemory})
	d.Request(0, 1, b0, 1)
	wantAct(t, d.Request(time.Second, 2, b0, 1), ActForward, 1)
	d.Retry(2*time.Second, 2, b0, 1, NoClient)
	if cs, _ := d.ClientStats(1); cs.Misses != 0 {
		t.Fatalf("misses of 1 = %d, want 0 (nothing remembered)", cs.Misses)
	}
	wantAct(t, d.Request(3*time.Second, 3, b0, 1), ActForward, 2) // round robin: after 1
	d.Retry(4*time.Second, 3, b0, 1, 2)
	if cs, _ := d.ClientStats(2); cs.Misses != 1 {
		t.Fatalf("misses of 2 = %d, want 1 (named)", cs.Misses)
	}
	if _, err := New(Config{ForwardMemory: -2}); err == nil {
		t.Fatal("ForwardMemory -2 accepted")
	}
}

// Batched notifications: sent when the queue is full.
func TestBatchedNotifications(t *testing.T) {
	h := newHolder(t, HolderConfig{QueueLen: 3})
	var batches [][]block.ID
	for i := range 7 {
		if b := h.Evicted(block.ID{File: 1, Index: uint64(i)}); b != nil {
			batches = append(batches, b)
		}
	}
	if len(batches) != 2 || len(batches[0]) != 3 || batches[1][0].Index != 3 {
		t.Fatalf("batches = %v, want two of three", batches)
	}
	if s := h.Stats(); s.Batched != 2 || s.Queued != 1 || s.Evictions != 7 {
		t.Fatalf("stats = %+v", s)
	}
	if f := h.Flush(); len(f) != 1 || h.Flush() != nil {
		t.Fatalf("flush = %v, want the one left, then nothing", f)
	}
}

// With notifications off, nothing is ever sent, not even on demand.
func TestNotificationsOff(t *testing.T) {
	h := newHolder(t, HolderConfig{QueueLen: 1, NoNotify: true})
	if h.Evicted(b0) != nil {
		t.Fatal("notification sent while off")
	}
	if r := h.Forward(b0, 1, Local{}); r.Answer != Negative || r.Notify != nil {
		t.Fatalf("reply = %+v, want negative without notification", r)
	}
	if s := h.Stats(); s.Batched+s.OnDemand+s.NotifiedBlocks != 0 || s.Queued != 0 {
		t.Fatalf("stats = %+v, want no notifications", s)
	}
}

// Stale version at the holder: it drops the file and answers negatively; a
// newer local version (unflushed writes) answers negatively without a drop.
func TestVersions(t *testing.T) {
	h := newHolder(t, HolderConfig{})
	for _, tc := range []struct {
		local Local
		v     block.Version
		want  Reply
	}{
		{Local{Present, 4}, 5, Reply{Answer: Negative, DropFile: true}},
		{Local{Pending, 4}, 5, Reply{Answer: Negative, DropFile: true}},
		{Local{Present, 6}, 5, Reply{Answer: Negative}},
		{Local{Pending, 6}, 5, Reply{Answer: Negative}},
		{Local{Present, 5}, 5, Reply{Answer: Send}},
		{Local{Pending, 5}, 5, Reply{Answer: Wait}},
	} {
		if got := h.Forward(b0, tc.v, tc.local); got.Answer != tc.want.Answer || got.DropFile != tc.want.DropFile || got.Notify != nil {
			t.Errorf("Forward(v%d, %+v) = %+v, want %+v", tc.v, tc.local, got, tc.want)
		}
	}
	if s := h.Stats(); s.Stale != 2 || s.Newer != 2 {
		t.Fatalf("stats = %+v", s)
	}
	for _, tc := range []struct {
		have, got block.Version
		want      Verdict
	}{{3, 3, Use}, {3, 4, UseAfterDrop}, {3, 2, Reject}, {0, 2, UseAfterDrop}, {3, 0, Reject}} {
		if v := Admit(tc.have, tc.got); v != tc.want {
			t.Errorf("Admit(%d, %d) = %v, want %v", tc.have, tc.got, v, tc.want)
		}
	}
}

// A file change drops the file's entries; a request carrying a new version
// resets a stale entry even without FileChanged; forwards carry the version.
func TestFileChange(t *testing.T) {
	d := newDir(t, Config{})
	d.Request(0, 1, b0, 1)
	d.Request(0, 1, b1, 1)
	d.Request(0, 1, c0, 1)
	d.FileChanged(b0.File)
	if d.Holders(b0) != nil || d.Holders(b1) != nil || d.Holders(c0) == nil {
		t.Fatal("FileChanged did not drop exactly the file's entries")
	}
	wantAct(t, d.Request(0, 2, b0, 2), ActServe, 0)
	a := d.Request(0, 3, b0, 2)
	if a.Kind != ActForward || a.To != 2 || a.Version != 2 {
		t.Fatalf("forward = %+v, want to 2 with version 2", a)
	}
	// version 3 appears without FileChanged: the entry's holders are stale
	wantAct(t, d.Request(0, 4, b0, 3), ActServe, 0)
	if got := d.Holders(b0); !slices.Equal(got, []ClientID{4}) {
		t.Fatalf("holders = %v, want [4]", got)
	}
	if s := d.Stats(); s.FileDrops != 2 || s.VersionDrops != 1 || s.FileChanges != 1 {
		t.Fatalf("stats = %+v", s)
	}
}

// Misses past the threshold trigger a ping; no answer marks the client
// failed: purged, never forwarded to. A fresh mount brings it back clean.
func TestFailedClientAndRejoin(t *testing.T) {
	d := newDir(t, Config{MissThreshold: 2, PingTimeout: time.Second})
	for i := range 4 {
		d.Request(0, 1, block.ID{File: 1, Index: uint64(i)}, 1)
	}
	ask := func(now time.Duration, c ClientID, i uint64) Action {
		a := d.Request(now, c, block.ID{File: 1, Index: i}, 1)
		wantAct(t, a, ActForward, 1)
		return d.Retry(now, c, a.Block, 1, NoClient)
	}
	if a := ask(0, 2, 0); a.Ping != 0 {
		t.Fatalf("ping after one miss: %+v", a)
	}
	a := ask(0, 3, 1)
	if a.Ping != 1 {
		t.Fatalf("retry = %+v, want a ping of 1 after two misses", a)
	}
	// while the ping is outstanding, 1 is not forwarded to
	wantAct(t, d.Request(0, 4, block.ID{File: 1, Index: 2}, 1), ActServe, 0)
	if f := d.Tick(500 * time.Millisecond); f != nil {
		t.Fatalf("failed before the timeout: %v", f)
	}
	if f := d.Tick(time.Second); !slices.Equal(f, []ClientID{1}) {
		t.Fatalf("Tick = %v, want [1] failed", f)
	}
	if cs, _ := d.ClientStats(1); !cs.Failed {
		t.Fatal("client 1 not failed")
	}
	for i := range 4 {
		id := block.ID{File: 1, Index: uint64(i)}
		if slices.Contains(d.Holders(id), 1) {
			t.Fatalf("failed client still holds %v", id)
		}
		if a := d.Request(2*time.Second, 5, id, 1); a.Kind == ActForward && a.To == 1 {
			t.Fatal("forwarded to a failed client")
		}
	}
	// a remount: clean, and forwarded to again once it holds something
	d.ClientJoined(1)
	if cs, _ := d.ClientStats(1); cs.Failed || cs.MissRun != 0 {
		t.Fatalf("after join: %+v", cs)
	}
	d.Request(3*time.Second, 1, b0, 1)
	wantAct(t, d.Request(3*time.Second, 2, b0, 1), ActForward, 1)
	if s := d.Stats(); s.Pings != 1 || s.Failures != 1 || s.Joins != 1 {
		t.Fatalf("stats = %+v", s)
	}
}

// A ping answered clears the miss run; a request or notification from the
// client clears it too.
func TestPingOK(t *testing.T) {
	d := newDir(t, Config{MissThreshold: 1})
	d.Request(0, 1, b0, 1)
	d.Request(0, 2, b0, 1)
	if a := d.Retry(0, 2, b0, 1, 1); a.Ping != 1 {
		t.Fatalf("retry = %+v, want ping of 1", a)
	}
	d.PingOK(1)
	if cs, _ := d.ClientStats(1); cs.Pinging || cs.MissRun != 0 || cs.Failed {
		t.Fatalf("after PingOK: %+v", cs)
	}
	if f := d.Tick(time.Hour); f != nil {
		t.Fatalf("Tick failed %v after PingOK", f)
	}
}

// A rejoin (fresh mount) purges the client's old entries first.
func TestRejoinPurges(t *testing.T) {
	d := newDir(t, Config{})
	d.Request(0, 1, b0, 1)
	d.Request(0, 2, b0, 1)
	d.Request(0, 1, b1, 1)
	d.ClientJoined(1)
	if got := d.Holders(b0); !slices.Equal(got, []ClientID{2}) {
		t.Fatalf("holders of b0 = %v, want [2]", got)
	}
	if d.Holders(b1) != nil || d.Len() != 1 {
		t.Fatalf("b1 still tracked; len = %d", d.Len())
	}
}

// A restarted server is a new, empty directory: it serves everything and
// rebuilds as requests arrive; clients still holding old blocks are simply
// not forwarded to until they ask again.
func TestServerRestart(t *testing.T) {
	d := newDir(t, Config{})
	d.Request(0, 1, b0, 1)
	d = newDir(t, Config{})
	wantAct(t, d.Request(0, 2, b0, 1), ActServe, 0)
	wantAct(t, d.Request(0, 3, b0, 1), ActForward, 2)
	// a retry for a forward the old server made: served, nobody blamed
	if a := d.Retry(0, 4, b0, 1, NoClient); a.Kind != ActServe {
		t.Fatalf("retry = %+v", a)
	}
	if s := d.Stats(); s.ForwardMisses != 0 {
		t.Fatalf("stats = %+v, want no misses", s)
	}
}

// The directory holds at most Entries entries, recycling the least recently
// used.
func TestCapacityLRU(t *testing.T) {
	d := newDir(t, Config{Entries: 3})
	id := func(i uint64) block.ID { return block.ID{File: 1, Index: i} }
	for i := range uint64(3) {
		d.Request(0, 1, id(i), 1)
	}
	d.Request(0, 2, id(0), 1) // touches 0: LRU order now 1, 2, 0
	d.Request(0, 1, id(3), 1) // recycles 1
	if d.Holders(id(1)) != nil || d.Holders(id(0)) == nil || d.Len() != 3 {
		t.Fatalf("after recycle: len %d, holders(1) = %v", d.Len(), d.Holders(id(1)))
	}
	d.Request(0, 1, id(4), 1) // recycles 2
	if d.Holders(id(2)) != nil {
		t.Fatal("entry 2 not recycled")
	}
	if s := d.Stats(); s.Recycled != 2 || s.Entries != 3 {
		t.Fatalf("stats = %+v", s)
	}
	// a recycled block is served again by the server
	wantAct(t, d.Request(0, 2, id(1), 1), ActServe, 0)
}

func TestConfigValidate(t *testing.T) {
	if _, err := New(Config{Entries: -1}); err == nil {
		t.Fatal("negative entries accepted")
	}
	if _, err := NewHolder(HolderConfig{QueueLen: -1}); err == nil {
		t.Fatal("negative queue length accepted")
	}
	d, err := New(Config{})
	if err != nil || d.Config().Entries != DefaultEntries {
		t.Fatalf("defaults: %v %+v", err, d.Config())
	}
	h, _ := NewHolder(HolderConfig{})
	if h.Config().QueueLen != 400 || h.Config().NoNotify {
		t.Fatalf("holder defaults: %+v", h.Config())
	}
}
