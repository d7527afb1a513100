package proxy_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/agent"
	"github.com/coopfs/coopfs/internal/cache"
	"github.com/coopfs/coopfs/internal/obs"
	"github.com/coopfs/coopfs/internal/proxy"
	"github.com/coopfs/coopfs/internal/server"
	"github.com/coopfs/coopfs/internal/server/servertest"
)

// liveness bounds each step of the tests below: a recall that deadlocks
// waits for the server's recall timeout (a minute there) or the proxy's
// recall of its client (15 s), so a step that takes this long failed.
const liveness = 10 * time.Second

// wbBehind is a write-back client behind a write-back proxy in front of
// an in-process server whose recalls and breaks wait a minute.
type wbBehind struct {
	export, srv, addr string
	pcfg              proxy.Config
	p                 *proxy.Proxy
	a                 *agent.Agent
}

func behindProxy(t *testing.T) wbBehind {
	t.Helper()
	wb := wbBehind{export: t.TempDir()}
	wb.srv = servertest.Serve(t, server.Config{Export: wb.export, BlockSize: bs, Secret: secret, Squash: server.SquashNone, Metrics: obs.NewMetrics(),
		Policy: "none", RecallTimeout: time.Minute, CallbackTimeout: time.Minute})
	wb.pcfg = proxy.Config{WritePolicy: cache.WriteBack,
		Disk: proxy.DiskConfig{Dir: t.TempDir(), Size: 16 << 20}, WriteBack: proxy.WriteBackConfig{Delay: time.Hour}}
	wb.p, wb.addr, _ = runProxy(t, wb.srv, wb.pcfg, "127.0.0.1:0")
	a, err := agent.New(context.Background(), agent.Config{Server: wb.addr, Secret: secret, Name: "a", CacheSize: 16 << 20,
		ReconnectTimeout: 20 * time.Second, WritePolicy: cache.WriteBack, WriteBack: agent.WriteBackConfig{Delay: time.Hour},
		Disk: agent.DiskConfig{Dir: filepath.Join(t.TempDir(), "a"), Size: 16 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	wb.a = a
	return wb
}

// TestWriteBackMountBehindProxy: a write-back client behind a write-back
// proxy declares its writes to the proxy, which holds the delegation
// upstream (deleg.go). The client's write-back makes the file dirty at
// the proxy without breaking the client's own delegation, the proxy's own
// write-back of the file while the client holds newer writes does not
// recall the client (before, both deadlocked until the server's callback
// or recall timeout disconnected the client), and a direct client's open
// recalls the file through the proxy from the client: it reads the newest
// data, which the export then holds.
func TestWriteBackMountBehindProxy(t *testing.T) {
	wb := behindProxy(t)
	export, p, a := wb.export, wb.p, wb.a
	direct := newAgent(t, wb.srv)

	step := func(what string, f func(ctx context.Context) error) {
		t.Helper()
		c, cancel := context.WithTimeout(ctx(), liveness)
		defer cancel()
		if err := f(c); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	one, two := pattern(3*bs+100, 1), pattern(3*bs+100, 2)
	step("write f at the client", func(context.Context) error { return write(t, a, "f", one) })
	step("the client's write-back to the proxy", func(c context.Context) error { _, err := a.Flush(c, nil); return err })
	step("write f again at the client", func(c context.Context) error { return overwrite(c, a, "f", two) })
	step("the proxy's write-back", func(c context.Context) error { _, err := p.Flush(c, nil); return err })
	if got := readExport(t, export, "f"); !bytes.Equal(got, one) {
		t.Fatalf("the export holds %d bytes of f after the proxy's write-back; want the %d the client wrote back", len(got), len(one))
	}
	step("a direct client's read", func(context.Context) error {
		if got := read(t, direct, "f"); !bytes.Equal(got, two) {
			t.Fatalf("the direct client read %d bytes of f; want the %d the client behind the proxy holds", len(got), len(two))
		}
		return nil
	})
	if got := readExport(t, export, "f"); !bytes.Equal(got, two) {
		t.Fatalf("the export holds %d bytes of f after the recall; want %d", len(got), len(two))
	}
}

// readExport returns the export's copy of name (nil if none).
func readExport(t *testing.T, export, name string) []byte {
	t.Helper()
	b, _ := os.ReadFile(filepath.Join(export, name))
	return b
}

// overwrite writes data over the start of path, as a's caller.
func overwrite(c context.Context, a *agent.Agent, path string, data []byte) error {
	f, _, err := a.Open(c, path, syscall.O_RDWR)
	if err != nil {
		return err
	}
	defer f.Release(c)
	_, err = f.WriteAt(c, data, 0)
	return err
}

// TestWriteBackMountBehindRestartedProxy: a write-back client holding
// unflushed writes declares them again through a restarted proxy, which
// knows no handle of the file then; the client's own write-back, whose
// open the upstream recalls from the proxy, must not recall the client
// (its write-back would wait for itself until the proxy disconnects it).
func TestWriteBackMountBehindRestartedProxy(t *testing.T) {
	wb := behindProxy(t)
	a := wb.a
	data := pattern(2*bs+9, 3)
	if err := write(t, a, "f", data); err != nil {
		t.Fatal(err)
	}
	wb.p.Close()
	p, _, m := runProxy(t, wb.srv, wb.pcfg, wb.addr)
	c, cancel := context.WithTimeout(ctx(), liveness)
	defer cancel()
	// The client reconnects and declares f again, in the background.
	if _, err := a.GetAttr(c, ""); err != nil {
		t.Fatal(err)
	}
	for counter(m, obs.MetricMessages, map[string]string{"type": "DelegateWrite", "dir": obs.DirIn}) == 0 {
		if c.Err() != nil {
			t.Fatal("the client did not declare its unflushed writes to the restarted proxy")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := a.Flush(c, nil); err != nil {
		t.Fatalf("the client's write-back through the restarted proxy: %v", err)
	}
	if _, err := p.Flush(c, nil); err != nil {
		t.Fatal(err)
	}
}
