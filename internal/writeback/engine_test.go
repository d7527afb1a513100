package writeback_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/cache/disk"
	"github.com/coopfs/coopfs/internal/cache/mem"
	"github.com/coopfs/coopfs/internal/server"
	"github.com/coopfs/coopfs/internal/server/servertest"
	"github.com/coopfs/coopfs/internal/vfs"
	"github.com/coopfs/coopfs/internal/wire"
	"github.com/coopfs/coopfs/internal/writeback"
)

// The engine's tests run it against a real server over real TCP; the
// front end (upstream, below) is the smallest one: one connection,
// registered for callbacks, that answers recalls with Engine.Recall.

const bs = 4096

var me = vfs.Caller{UID: uint32(os.Getuid()), GID: uint32(os.Getgid())}

// startServer serves a fresh export; recalls that find no holder fail
// with EIO after recallTimeout.
func startServer(t *testing.T, recallTimeout time.Duration) (export, addr string) {
	t.Helper()
	export = t.TempDir()
	return export, servertest.Serve(t, server.Config{Export: export, BlockSize: bs, Squash: server.SquashNone, RecallTimeout: recallTimeout})
}

// dial connects a raw protocol client named name, serving what the server
// sends with h (nil: nothing).
func dial(t *testing.T, addr, name string, h wire.Handler) *wire.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	hs, err := wire.ClientHandshake(context.Background(), nc, wire.MustSecurity(wire.SecurityConfig{Insecure: true}), "",
		wire.Hello{Role: wire.RoleClient, Name: name, BootID: uint64(time.Now().UnixNano())})
	if err != nil {
		t.Fatal(err)
	}
	c := wire.NewConn(hs.Conn, hs.Reader, wire.ConnConfig{Handler: h})
	t.Cleanup(func() { c.Close() })
	return c
}

// upstream is a test front end: a connection in the engine's name.
type upstream struct {
	t    *testing.T
	addr string
	name string
	e    *writeback.Engine
	// before, when set, sees every message before it goes.
	before atomic.Pointer[func(wire.Msg)]

	// breaks counts the CallbackBreaks the upstream sent, writes the
	// WriteSeqs the engine sent (one per block written back).
	breaks, writes atomic.Int64

	mu      sync.Mutex
	conn    *wire.Conn
	gen     uint64
	seq     atomic.Uint64
	settled []uint64
	closed  bool
}

func (u *upstream) Gen(ctx context.Context) (uint64, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return 0, errors.New("the front end is closed")
	}
	if u.conn != nil && u.conn.Err() == nil {
		return u.gen, nil
	}
	u.conn = dial(u.t, u.addr, u.name, wire.HandlerFunc(u.serve))
	if _, err := u.conn.Call(ctx, &wire.CallbackRegister{}); err != nil {
		return 0, err
	}
	u.gen++
	u.e.Reconnected()
	return u.gen, nil
}

func (u *upstream) Call(ctx context.Context, m wire.Msg) (wire.Msg, uint64, error) {
	if f := u.before.Load(); f != nil {
		(*f)(m)
	}
	if _, ok := m.(*wire.WriteSeq); ok {
		u.writes.Add(1)
	}
	gen, err := u.Gen(ctx)
	if err != nil {
		return nil, 0, err
	}
	u.mu.Lock()
	c := u.conn
	u.mu.Unlock()
	r, err := c.CallTimeout(ctx, m, 10*time.Second)
	return r, gen, err
}

func (u *upstream) Release(gen, h uint64) {
	u.mu.Lock()
	c, cur := u.conn, u.gen
	u.mu.Unlock()
	if c != nil && cur == gen {
		c.Send(&wire.ReleaseBatch{Handles: []uint64{h}})
	}
}

func (u *upstream) NextSeq() uint64 { return u.seq.Add(1) }

func (u *upstream) Settled(ino, _ uint64, _ wire.Attr) {
	u.mu.Lock()
	u.settled = append(u.settled, ino)
	u.mu.Unlock()
}

func (u *upstream) serve(ctx context.Context, _ *wire.Conn, m wire.Msg) (wire.Msg, error) {
	if br, ok := m.(*wire.CallbackBreak); ok {
		u.breaks.Add(1)
		u.e.Recall(ctx, br)
	}
	return &wire.OK{}, nil
}

// drop closes the connection for good (as the front end's close, or its
// death, would).
func (u *upstream) drop() {
	u.mu.Lock()
	u.closed = true
	if u.conn != nil {
		u.conn.Close()
	}
	u.mu.Unlock()
}

// newEngine starts an engine named name on a fresh cache directory.
func newEngine(t *testing.T, addr, name string) (*writeback.Engine, *upstream) {
	t.Helper()
	dir := t.TempDir()
	d, err := disk.Open(disk.Config{Dir: dir, Size: 4 << 20, BlockSize: bs, Banks: 2, Assoc: 4})
	if err != nil {
		t.Fatal(err)
	}
	m, err := mem.New(mem.Config{Capacity: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{t: t, addr: addr, name: name}
	e, err := writeback.New(writeback.Config{Tuning: writeback.Tuning{Delay: time.Hour}, Dir: dir, Disk: d, Mem: m}, u)
	if err != nil {
		t.Fatal(err)
	}
	u.e = e
	e.Start(context.Background())
	t.Cleanup(func() { e.Close(); d.Close() })
	return e, u
}

// create makes an empty file in the export and returns what a write of it
// through the engine needs.
func create(t *testing.T, export, addr, name string) writeback.NewFile {
	t.Helper()
	if err := os.WriteFile(filepath.Join(export, name), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := dial(t, addr, "stat", nil).Call(context.Background(), &wire.GetAttr{Path: name})
	if err != nil {
		t.Fatal(err)
	}
	at := r.(*wire.AttrReply).Attr
	return writeback.NewFile{Ino: at.Ino, Path: name, Tag: at.Version, Caller: me, HasCaller: true, Attr: at}
}

func noFetch(context.Context, writeback.BlockRef) ([]byte, error) {
	return nil, errors.New("nothing to fetch: every write covers whole new blocks")
}

func write(t *testing.T, e *writeback.Engine, nf writeback.NewFile, off int64, p []byte) {
	t.Helper()
	if _, err := e.Write(context.Background(), nf, off, p, noFetch); err != nil {
		t.Fatal(err)
	}
}

// openElsewhere opens path on another client's connection, as a reader
// would: the server recalls the file from its holder first.
func openElsewhere(t *testing.T, addr, path string) error {
	t.Helper()
	_, err := dial(t, addr, "reader", nil).Call(context.Background(), &wire.Open{Path: path, Flags: syscall.O_RDONLY})
	return err
}

func wantExport(t *testing.T, export, name string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(filepath.Join(export, name))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("export %s: %d bytes (%v), want %d", name, len(got), err, len(want))
	}
}

func fill(n int, b byte) []byte { return bytes.Repeat([]byte{b}, n) }

// TestRecallWritesBackOnce: a recalled file is written back once, also
// when it is written to during the recall; what that write left dirty is
// declared again, so the next open elsewhere recalls it in turn (before,
// the recall wrote such a file back up to three times and then held its
// new data undeclared).
func TestRecallWritesBackOnce(t *testing.T) {
	export, addr := startServer(t, 10*time.Second)
	e, u := newEngine(t, addr, "holder")
	nf := create(t, export, addr, "f")
	first := fill(3*bs, 1)
	write(t, e, nf, 0, first)
	var once sync.Once
	during := func(m wire.Msg) {
		if _, ok := m.(*wire.WriteSeq); ok {
			// A writer writes while the recall's write-back is under way.
			once.Do(func() {
				if _, err := e.Write(context.Background(), nf, 3*bs, fill(bs, 2), noFetch); err != nil {
					t.Error(err)
				}
			})
		}
	}
	u.before.Store(&during)
	if err := openElsewhere(t, addr, "f"); err != nil {
		t.Fatal(err)
	}
	u.before.Store(nil)
	// Counted, per recalled file: the recall messages, the write-backs
	// and the blocks they sent (each of the 3 dirty blocks once).
	if st, br, ws := e.Stats(), u.breaks.Load(), u.writes.Load(); st.Recalls != 1 || st.Passes != 1 || br != 1 || ws != 3 {
		t.Fatalf("after one recall: %+v, %d breaks, %d blocks sent; want 1 break, 1 recall written back in 1 pass, 3 blocks", st, br, ws)
	}
	got, _ := os.ReadFile(filepath.Join(export, "f"))
	if len(got) < len(first) || !bytes.Equal(got[:len(first)], first) {
		t.Fatalf("after the recall the export has %d bytes; want the %d written before it", len(got), len(first))
	}
	if !e.Holds(nf.Ino) {
		t.Fatal("the write made during the recall is not dirty")
	}
	if err := openElsewhere(t, addr, "f"); err != nil {
		t.Fatal(err)
	}
	if st := e.Stats(); st.Recalls != 2 {
		t.Fatalf("the second open elsewhere recalled %d times in all; want 2: the data left dirty was not declared again", st.Recalls)
	}
	if st, br, ws := e.Stats(), u.breaks.Load(), u.writes.Load(); st.Passes != 2 || br != 2 || ws != 4 {
		t.Fatalf("after the second recall: %+v, %d breaks, %d blocks sent; want 2 breaks, 2 passes, 4 blocks", st, br, ws)
	}
	wantExport(t, export, "f", append(first, fill(bs, 2)...))
}

// TestReturnNotOvertaken: a file written again right after its write-back
// takes a new delegation, which the old one's return, still on its way,
// must not undo: another client's open then recalls the new data.
func TestReturnNotOvertaken(t *testing.T) {
	export, addr := startServer(t, 10*time.Second)
	e, _ := newEngine(t, addr, "holder")
	nf := create(t, export, addr, "f")
	var want []byte
	for round := range 30 {
		p := fill(bs, byte(round))
		write(t, e, nf, int64(len(want)), p)
		want = append(want, p...)
		if _, err := e.FlushAll(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		p = fill(bs, byte(round)+100)
		nf.Size = int64(len(want))
		write(t, e, nf, int64(len(want)), p)
		want = append(want, p...)
		if err := openElsewhere(t, addr, "f"); err != nil {
			t.Fatal(err)
		}
		wantExport(t, export, "f", want)
		nf.Size = int64(len(want))
	}
}

// TestCloseReturnsDelegations: Close writes back and returns the
// delegations before the front end drops its connection; a delegation
// left behind would make the file an orphan, whose opens fail with EIO
// after the recall timeout.
func TestCloseReturnsDelegations(t *testing.T) {
	export, addr := startServer(t, 2*time.Second)
	e, u := newEngine(t, addr, "holder")
	nf := create(t, export, addr, "f")
	data := fill(2*bs, 7)
	write(t, e, nf, 0, data)
	slow := func(m wire.Msg) {
		if _, ok := m.(*wire.DelegateReturn); ok {
			time.Sleep(100 * time.Millisecond) // a slow link: the return is still on its way when Close has written back
		}
	}
	u.before.Store(&slow)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	u.drop()
	if err := openElsewhere(t, addr, "f"); err != nil {
		t.Fatalf("open after the holder closed: %v", err)
	}
	wantExport(t, export, "f", data)
}

// TestStartReleasesOrphans: a holder that died between a write-back and
// the return of its delegation left the file an orphan of its name. An
// engine of that name starting with nothing left dirty says so (it
// connects and declares at Start even then), and the file's opens proceed
// instead of failing with EIO after the recall timeout. This is what lets
// the engine delete a journal record before the delegation's return.
// TestRecallOfHolderThatDies: a holder whose connection ends while its
// delegation is being recalled leaves the file an orphan, which the open
// waits for (up to the recall timeout) as for any orphan, rather than
// failing at once; the open goes through when a client of the holder's
// name comes back.
func TestRecallOfHolderThatDies(t *testing.T) {
	export, addr := startServer(t, 10*time.Second)
	nf := create(t, export, addr, "f")
	var c *wire.Conn
	dies := wire.HandlerFunc(func(ctx context.Context, _ *wire.Conn, m wire.Msg) (wire.Msg, error) {
		if _, ok := m.(*wire.CallbackBreak); ok {
			// The holder dies before it acks the recall: it never answers
			// (an error reply could reach the server before the close).
			go c.Close()
			<-ctx.Done() // the connection's context: canceled by the close
			return nil, ctx.Err()
		}
		return &wire.OK{}, nil
	})
	c = dial(t, addr, "holder", dies)
	for _, m := range []wire.Msg{&wire.CallbackRegister{}, &wire.As{Msg: &wire.DelegateWrite{Ino: nf.Ino, Path: "f"}}} {
		if _, err := c.Call(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	reader := dial(t, addr, "reader", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	_, err := reader.Call(ctx, &wire.Open{Path: "f", Flags: syscall.O_RDONLY})
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("open while the holder died during its recall: %v, want it to wait for the orphan's holder", err)
	}
	newEngine(t, addr, "holder")
	if err := openElsewhere(t, addr, "f"); err != nil {
		t.Fatalf("open of the orphan after its holder's name came back: %v", err)
	}
}

func TestStartReleasesOrphans(t *testing.T) {
	export, addr := startServer(t, 10*time.Second)
	nf := create(t, export, addr, "f")
	c := dial(t, addr, "holder", nil)
	for _, m := range []wire.Msg{&wire.CallbackRegister{}, &wire.As{Msg: &wire.DelegateWrite{Ino: nf.Ino, Path: "f"}}} {
		if _, err := c.Call(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	c.Close() // the holder dies: f is an orphan of "holder"
	reader := dial(t, addr, "reader", nil)
	for {
		// Until an open of f waits: the server has seen the holder go.
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		_, err := reader.Call(ctx, &wire.Open{Path: "f", Flags: syscall.O_RDONLY})
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	newEngine(t, addr, "holder")
	if err := openElsewhere(t, addr, "f"); err != nil {
		t.Fatalf("open of the orphan after its holder's name came back: %v", err)
	}
}
