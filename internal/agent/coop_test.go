package agent_test

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/agent"
	"github.com/coopfs/coopfs/internal/coord/directory"
	"github.com/coopfs/coopfs/internal/obs"
	"github.com/coopfs/coopfs/internal/server"
	"github.com/coopfs/coopfs/internal/server/servertest"
	"github.com/coopfs/coopfs/internal/wire"
)

func startDirServer(t *testing.T, export string, m *obs.Metrics) string {
	return startDirServerWith(t, export, m, directory.Config{})
}

func startDirServerWith(t *testing.T, export string, m *obs.Metrics, dc directory.Config) string {
	t.Helper()
	return servertest.Serve(t, server.Config{Export: export, BlockSize: 4096, Policy: "directory", Metrics: m, Directory: dc, Squash: server.SquashNone})
}

func readAll(ctx context.Context, a *agent.Agent, path string) ([]byte, error) {
	f, attr, err := a.Open(ctx, path, syscall.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer func() { f.Flush(ctx); f.Release(ctx) }() // as the kernel does on close
	buf := make([]byte, attr.Size)
	n, err := f.ReadAt(ctx, buf, 0)
	return buf[:n], err
}

func TestDirectoryPeersServeMisses(t *testing.T) {
	export := t.TempDir()
	data := pattern(256<<10, 3)
	if err := os.WriteFile(filepath.Join(export, "f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	sm := obs.NewMetrics()
	addr := startDirServer(t, export, sm)
	ctx := asRoot()
	var agents []*agent.Agent
	var ms []*obs.Metrics
	for i := 0; i < 3; i++ {
		m := obs.NewMetrics()
		a, err := agent.New(ctx, agent.Config{Server: addr, Policy: "directory", Metrics: m,
			ReadAhead: 2, ForwardTimeout: 2 * time.Second, ReconnectTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		agents, ms = append(agents, a), append(ms, m)
	}
	// The first client reads the file alone: everything from the server.
	if got, err := readAll(ctx, agents[0], "f"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("first reader: %v", err)
	}
	// The other two read at once: the server forwards their misses.
	var wg sync.WaitGroup
	for _, a := range agents[1:] {
		wg.Add(1)
		go func(a *agent.Agent) {
			defer wg.Done()
			if got, err := readAll(ctx, a, "f"); err != nil || !bytes.Equal(got, data) {
				t.Errorf("reader got %d bytes, err %v", len(got), err)
			}
		}(a)
	}
	wg.Wait()
	peer := 0.0
	for _, m := range ms[1:] {
		ss := scrape(t, m)
		peer += ss.Sum(obs.MetricReads, map[string]string{"layer": obs.LayerPeer})
	}
	blocks := float64(len(data) / 4096)
	if peer < blocks {
		t.Errorf("peers served %v blocks to the two later readers; want at least %v (half their misses)", peer, blocks)
	}
	fwd := scrape(t, sm).Sum("coopfs_directory_forwards_total", nil)
	if fwd < peer {
		t.Errorf("server forwarded %v requests but peers served %v", fwd, peer)
	}
}

func TestDirectoryHolderGoneCostsOnlyATimeout(t *testing.T) {
	export := t.TempDir()
	data := pattern(64<<10, 4)
	os.WriteFile(filepath.Join(export, "f"), data, 0o644)
	addr := startDirServer(t, export, obs.NewMetrics())
	ctx := asRoot()
	holder, err := agent.New(ctx, agent.Config{Server: addr, Policy: "directory"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readAll(ctx, holder, "f"); err != nil {
		t.Fatal(err)
	}
	holder.Close() // its connection drops: the server marks it failed
	m := obs.NewMetrics()
	reader, err := agent.New(ctx, agent.Config{Server: addr, Policy: "directory", Metrics: m, ForwardTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	got, err := readAll(ctx, reader, "f")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("reader after the holder left: %d bytes, %v", len(got), err)
	}
}

func TestPolicyMismatchIsAClearError(t *testing.T) {
	c := startServer(t, t.TempDir(), "127.0.0.1:0", nil, 4096)
	_, err := agent.New(context.Background(), agent.Config{Server: c.addr, Policy: "directory"})
	if err == nil {
		t.Fatal("a directory mount of a none server was accepted")
	}
}

// A holder that disconnects while a forward to it is outstanding: the
// server tells the requester at once (a negative reply on its own
// connection), so the read completes without waiting out the forward
// timeout — the counters say nack, not timeout.
func TestDirectoryHolderDisconnectNacksItsForwards(t *testing.T) {
	export := t.TempDir()
	data := pattern(4096, 5)
	os.WriteFile(filepath.Join(export, "f"), data, 0o644)
	// The server leaves itself out of the rotation, so the reader's miss is
	// forwarded to the mute holder.
	addr := startDirServerWith(t, export, obs.NewMetrics(), directory.Config{ServerLast: true})
	ctx := asRoot()

	// A raw client that becomes a holder of block 0 and then never answers.
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0") // its peer listener: accepts, never serves
	defer ln.Close()
	hs, err := wire.ClientHandshake(ctx, nc, wire.MustSecurity(wire.SecurityConfig{Insecure: true}), "",
		wire.Hello{Role: wire.RoleClient, Name: "mute", Listen: ln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	forwarded := make(chan struct{}, 1)
	mute := wire.NewConn(hs.Conn, hs.Reader, wire.ConnConfig{Handler: wire.HandlerFunc(
		func(ctx context.Context, c *wire.Conn, m wire.Msg) (wire.Msg, error) {
			if _, ok := m.(*wire.Forward); ok {
				select {
				case forwarded <- struct{}{}:
				default:
				}
			}
			return nil, nil
		})})
	r, err := mute.Call(ctx, &wire.Open{Path: "f"})
	if err != nil {
		t.Fatal(err)
	}
	or := r.(*wire.OpenReply)
	if _, err := mute.Call(ctx, &wire.ReadBlock{Handle: or.Handle, File: or.Attr.Ino, Index: 0, Version: or.Attr.Version}); err != nil {
		t.Fatal(err)
	}
	go func() { <-forwarded; mute.Close() }()

	m := obs.NewMetrics()
	reader, err := agent.New(ctx, agent.Config{Server: addr, Policy: "directory", Metrics: m, ForwardTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	got, err := readAll(ctx, reader, "f")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read after the holder vanished: %d bytes, %v", len(got), err)
	}
	ss := scrape(t, m)
	if n := ss.Sum("coopfs_forwarded_timeouts_total", nil); n != 0 {
		t.Errorf("the requester timed out %v times; the server should have told it", n)
	}
	if n := ss.Sum("coopfs_forwarded_nacks_total", nil); n < 1 {
		t.Errorf("no negative reply reached the requester (nacks %v)", n)
	}
}

// A block the directory policy fetched is in the memory tier before it
// stops being "on its way": the server recorded this client as a holder
// when it answered, and a forward arriving in between was answered with a
// negative reply (the policy seam ended the mark before file.fetch stored
// the block: 17–36 PeerNacks per `bench coop copy --clients 8`).
func TestDirectoryFetchedBlockIsHeldAtOnce(t *testing.T) {
	export := t.TempDir()
	os.WriteFile(filepath.Join(export, "f"), pattern(3*4096, 5), 0o644)
	addr := startDirServer(t, export, obs.NewMetrics())
	a, err := agent.New(asRoot(), agent.Config{Server: addr, Policy: "directory", ReconnectTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for idx := range uint64(3) {
		state, err := agent.DirectoryStateAfterFetch(asRoot(), a, "f", idx)
		if err != nil {
			t.Fatal(err)
		}
		if state != "present" {
			t.Errorf("block %d: %s right after the policy's fetch, want present (a forward would be refused)", idx, state)
		}
	}
}
