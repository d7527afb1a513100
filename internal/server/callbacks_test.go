package server

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/wire"
)

func TestCallbackTableGrantTakeDrop(t *testing.T) {
	tb := newCBTable(0)
	since := tb.seq
	tb.grant(1, since, rd(10), rd(11))
	tb.grant(2, since, rd(10))
	tb.grant(2, since, grantObj{10, wire.CallbackWrite}) // the strongest kind is kept
	if err := tb.check(); err != nil {
		t.Fatal(err)
	}
	got := tb.take([]wire.BreakItem{{Ino: 10, Name: "x"}}, 1) // client 1 makes the change
	if len(got) != 1 || got[2] == nil || got[2].Kind != wire.CallbackWrite || len(got[2].Items) != 1 || got[2].Items[0].Name != "x" {
		t.Fatalf("take: %+v", got)
	}
	if got[2].Cause != 1 {
		t.Fatalf("the break names client %d as its cause, want the changer, 1 (a proxy spares it by that)", got[2].Cause)
	}
	if _, ok := tb.holders[10][1]; !ok {
		t.Fatal("the changer lost its own callback")
	}
	if _, ok := tb.holders[10][2]; ok {
		t.Fatal("a break must revoke the holder's callback")
	}
	if again := tb.take([]wire.BreakItem{{Ino: 10}}, 1); len(again) != 0 {
		t.Fatalf("a revoked holder was broken twice: %+v", again)
	}
	// A grant whose state was read before a break of its object raced.
	if r := tb.grant(2, since, rd(10), rd(12)); !slices.Equal(r.raced, []wire.BreakItem{{Ino: 10}}) {
		t.Fatalf("raced = %v, want [10]", r.raced)
	}
	if r := tb.grant(2, tb.seq, rd(10)); len(r.raced) != 0 {
		t.Fatalf("a grant after the break raced: %v", r.raced)
	}
	if n := tb.dropClient(2); n != 2 {
		t.Fatalf("dropClient = %d, want 2", n)
	}
	if err := tb.check(); err != nil {
		t.Fatal(err)
	}
	if len(tb.held) != 1 || tb.held[1] != 2 {
		t.Fatalf("held = %v", tb.held)
	}
}

func rd(ino uint64) grantObj { return grantObj{ino, wire.CallbackRead} }

// A grant raced only with the grantee's own changes needs no break (the
// grantee orders its own changes with what it caches); one raced with
// another client's, or with a change made directly in the export, does,
// whatever the grantee changed after it.
func TestCallbackTableOwnChangesDoNotRace(t *testing.T) {
	tb := newCBTable(0)
	since := tb.seq
	tb.take([]wire.BreakItem{{Ino: 7, Name: "a"}}, 1)
	if r := tb.grant(1, since, grantObj{7, wire.CallbackDir}); len(r.raced) != 0 {
		t.Fatalf("a grant raced only with the grantee's own change: %v", r.raced)
	}
	if r := tb.grant(2, since, grantObj{7, wire.CallbackDir}); len(r.raced) != 1 {
		t.Fatalf("a grant raced with another client's change: %v", r.raced)
	}
	since = tb.seq
	tb.take([]wire.BreakItem{{Ino: 7, Name: "b"}}, 2) // client 2's change
	tb.take([]wire.BreakItem{{Ino: 7, Name: "c"}}, 1) // then client 1's
	if r := tb.grant(1, since, grantObj{7, wire.CallbackDir}); len(r.raced) != 1 {
		t.Fatalf("client 2's change before client 1's own: %v, want raced", r.raced)
	}
	since = tb.seq
	tb.take([]wire.BreakItem{{Ino: 7, Name: "d"}}, 0) // made directly in the export
	tb.take([]wire.BreakItem{{Ino: 7, Name: "e"}}, 1)
	if r := tb.grant(1, since, grantObj{7, wire.CallbackDir}); len(r.raced) != 1 {
		t.Fatalf("a direct change before the grantee's own: %v, want raced", r.raced)
	}
}

func TestCallbackTableDirectoriesStayGranted(t *testing.T) {
	tb := newCBTable(0)
	tb.grant(1, 0, grantObj{5, wire.CallbackDir})
	for range 2 {
		got := tb.take([]wire.BreakItem{{Ino: 5, Name: "x"}}, 2)
		if len(got) != 1 || got[1].Kind != wire.CallbackDir {
			t.Fatalf("directory break: %+v", got)
		}
	}
	if r := tb.grant(1, 0, grantObj{5, wire.CallbackDir}); len(r.raced) != 1 || r.raced[0].Name != wire.BreakEntries {
		t.Fatalf("a raced directory grant must break all its entries: %+v", r.raced)
	}
	if err := tb.check(); err != nil {
		t.Fatal(err)
	}
}

func TestCallbackTableNoReadGrantOverAWriteDelegation(t *testing.T) {
	tb := newCBTable(0)
	tb.grant(1, 0, grantObj{7, wire.CallbackWrite})
	if r := tb.grant(2, 0, rd(7)); len(r.raced) != 1 {
		t.Fatalf("a read grant over another client's write delegation: raced %+v", r.raced)
	}
	if r := tb.grant(1, 0, rd(7)); len(r.raced) != 0 {
		t.Fatal("the delegate's own grant counted as raced")
	}
}

func TestCallbackTableBounds(t *testing.T) {
	tb := newCBTable(3)
	if r := tb.grant(1, 0, rd(1), rd(2), rd(3)); r.overflow {
		t.Fatal("overflow at the bound")
	}
	if r := tb.grant(1, 0, rd(4)); !r.overflow {
		t.Fatal("no overflow past the bound")
	}
	// The memory of breaks is bounded: forgetting raises the floor, and a
	// grant that began below it counts as raced.
	for i := range maxBrokeMemory + 1 {
		tb.take([]wire.BreakItem{{Ino: uint64(100 + i)}}, 0)
	}
	if len(tb.broke) > maxBrokeMemory {
		t.Fatalf("broke holds %d", len(tb.broke))
	}
	if r := tb.grant(2, 0, rd(5)); len(r.raced) != 1 {
		t.Fatal("a grant older than the floor must count as raced")
	}
	if err := tb.check(); err != nil {
		t.Fatal(err)
	}
}

// dialHandler connects a raw client that serves the server's requests with h.
func dialHandler(t *testing.T, addr string, h wire.HandlerFunc) *wire.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	hs, err := wire.ClientHandshake(context.Background(), nc, wire.MustSecurity(wire.SecurityConfig{Insecure: true}), "", wire.Hello{Role: wire.RoleClient, Name: "test", BootID: 1})
	if err != nil {
		t.Fatal(err)
	}
	c := wire.NewConn(hs.Conn, hs.Reader, wire.ConnConfig{Handler: h})
	t.Cleanup(func() { c.Close() })
	if _, err := call(t, c, &wire.CallbackRegister{}); err != nil {
		t.Fatal(err)
	}
	return c
}

// breaks records the breaks a raw client received.
type breaks struct {
	mu   sync.Mutex
	got  []wire.BreakItem
	hold chan struct{} // when set, a break is acked only once it is closed
}

func (b *breaks) serve(ctx context.Context, _ *wire.Conn, m wire.Msg) (wire.Msg, error) {
	cb, ok := m.(*wire.CallbackBreak)
	if !ok {
		return &wire.OK{}, nil
	}
	b.mu.Lock()
	b.got = append(b.got, cb.Items...)
	hold := b.hold
	b.mu.Unlock()
	if hold != nil {
		<-hold
	}
	return &wire.OK{}, nil
}

func (b *breaks) items() []wire.BreakItem {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.got)
}

func TestChangesBreakOtherHoldersBeforeTheyAreAnswered(t *testing.T) {
	export := t.TempDir()
	os.Mkdir(filepath.Join(export, "d"), 0o755)
	os.WriteFile(filepath.Join(export, "d", "f"), []byte("x"), 0o644)
	_, addr := testServer(t, Config{Export: export})
	var bb breaks
	b := dialHandler(t, addr, bb.serve)
	a := dialHandler(t, addr, (&breaks{}).serve)

	r, err := call(t, b, &wire.Lookup{Path: "d/f"})
	if err != nil {
		t.Fatal(err)
	}
	fIno := r.(*wire.AttrReply).Attr.Ino
	r, err = call(t, b, &wire.Lookup{Path: "d"})
	if err != nil {
		t.Fatal(err)
	}
	dIno := r.(*wire.AttrReply).Attr.Ino

	// A changes the file's mode: B hears of it before A's reply.
	if _, err := call(t, a, &wire.SetAttr{Path: "d/f", Valid: wire.SetMode, Mode: 0o600}); err != nil {
		t.Fatal(err)
	}
	if got := bb.items(); len(got) != 1 || got[0].Ino != fIno {
		t.Fatalf("breaks after setattr: %+v, want object %d", got, fIno)
	}
	// The break revoked B's callback on the file: another change sends nothing.
	if _, err := call(t, a, &wire.SetAttr{Path: "d/f", Valid: wire.SetMode, Mode: 0o644}); err != nil {
		t.Fatal(err)
	}
	if got := bb.items(); len(got) != 1 {
		t.Fatalf("a revoked callback was broken again: %+v", got)
	}
	// A creates an entry in d: B's callback on d breaks, naming the entry.
	r, err = call(t, a, &wire.Create{Path: "d/g", Flags: uint32(os.O_RDWR), Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	call(t, a, &wire.Release{Handle: r.(*wire.OpenReply).Handle})
	if got := bb.items(); len(got) != 2 || got[1] != (wire.BreakItem{Ino: dIno, Name: "g"}) {
		t.Fatalf("breaks after create: %+v", got)
	}
	// B's own changes never break B.
	if _, err := call(t, b, &wire.Lookup{Path: "d"}); err != nil {
		t.Fatal(err)
	}
	if err := func() error { _, err := call(t, b, &wire.Unlink{Path: "d/g"}); return err }(); err != nil {
		t.Fatal(err)
	}
	if got := bb.items(); len(got) != 2 {
		t.Fatalf("a client's own change broke its callbacks: %+v", got)
	}
}

func TestUnackedBreakDisconnectsTheHolder(t *testing.T) {
	export := t.TempDir()
	os.WriteFile(filepath.Join(export, "f"), []byte("x"), 0o644)
	_, addr := testServer(t, Config{Export: export, CallbackTimeout: 200 * time.Millisecond})
	stuck := &breaks{hold: make(chan struct{})}
	defer close(stuck.hold)
	b := dialHandler(t, addr, stuck.serve)
	a := dialHandler(t, addr, (&breaks{}).serve)
	if _, err := call(t, b, &wire.GetAttr{Path: "f"}); err != nil {
		t.Fatal(err)
	}
	// The writer is answered (after the bound), and the silent holder is
	// disconnected.
	if _, err := call(t, a, &wire.SetAttr{Path: "f", Valid: wire.SetMode, Mode: 0o600}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the holder that did not ack is still connected")
	}
	if len(stuck.items()) != 1 {
		t.Fatalf("breaks: %+v", stuck.items())
	}
}

func TestDirectChangesInTheExportBreakCallbacks(t *testing.T) {
	export := t.TempDir()
	os.WriteFile(filepath.Join(export, "f"), []byte("x"), 0o644)
	_, addr := testServer(t, Config{Export: export})
	var bb breaks
	b := dialHandler(t, addr, bb.serve)
	r, err := call(t, b, &wire.Lookup{Path: "f"})
	if err != nil {
		t.Fatal(err)
	}
	fIno := r.(*wire.AttrReply).Attr.Ino
	r, err = call(t, b, &wire.GetAttr{Path: ""})
	if err != nil {
		t.Fatal(err)
	}
	rootIno := r.(*wire.AttrReply).Attr.Ino
	waitBreak := func(what string, want wire.BreakItem) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !slices.Contains(bb.items(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no break %+v within 5s (got %+v)", what, want, bb.items())
			}
			time.Sleep(time.Millisecond)
		}
	}
	os.WriteFile(filepath.Join(export, "f"), []byte("changed"), 0o644)
	waitBreak("a file written in the export", wire.BreakItem{Ino: fIno})
	os.WriteFile(filepath.Join(export, "new"), nil, 0o644)
	waitBreak("a file made in the export", wire.BreakItem{Ino: rootIno, Name: "new"})
	os.Chmod(export, 0o711)
	waitBreak("the directory's mode changed", wire.BreakItem{Ino: rootIno})
}
