package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/obs"
)

// startProxyAt starts a proxy listening on addr (with /metrics on
// metrics) and waits until it accepts clients; the caller stops it.
func startProxyAt(t *testing.T, upstream, addr, metrics string, extra ...string) *e2eProxy {
	t.Helper()
	p := &e2eProxy{addr: addr, metrics: metrics}
	args := append([]string{"proxy", "--upstream", upstream, "--listen", p.addr, "--metrics", p.metrics}, extra...)
	p.e2eProc = startProc(t, "proxy "+p.addr, args...)
	t.Cleanup(func() {
		p.stop(5 * time.Second)
		if t.Failed() {
			t.Logf("%s stderr:\n%s", p.name, p.stderr.String())
		}
	})
	p.waitStarted(t, "msg=proxying", 30*time.Second)
	return p
}

// wbProxyArgs are the flags of a write-back proxy on cacheDir.
func wbProxyArgs(cacheDir string, extra ...string) []string {
	return append([]string{"--write-policy", "write-back", "--disk-cache", cacheDir, "--disk-cache-size", "64MiB",
		"--disk-banks", "4", "--disk-assoc", "4"}, extra...)
}

// flushProxy runs `coopfs flush --proxy` on p and returns its output.
func flushProxy(t *testing.T, p *e2eProxy) string {
	t.Helper()
	out, code := runCoopfs(t, 60*time.Second, nil, "flush", "--proxy", p.addr)
	if code != 0 {
		t.Fatalf("coopfs flush --proxy %s: exit %d; stdout:\n%s\nstderr:\n%s", p.addr, code, out.stdout.String(), out.stderr.String())
	}
	return out.stdout.String()
}

// TestE2EProxyWriteBack: client → proxy (write-back) → server. Writes
// complete at the proxy: the writer reads its data back and sees its size
// while the export does not have it; a client direct on the server opens
// the file after close and sees the data (the server recalls it from the
// proxy); `coopfs flush --proxy` writes back the rest; a file removed
// while dirty is never written back; a partial overwrite of a file keeps
// the rest of its blocks.
func TestE2EProxyWriteBack(t *testing.T) {
	needFUSE(t)
	srv := startServer(t, newExport(t), "--recall-timeout", "10s")
	px := startProxy(t, srv.addr, wbProxyArgs(filepath.Join(t.TempDir(), "cache"), "--write-back-delay", "1h")...)
	a := startMount(t, px.addr, "--name", "A")
	direct := startMount(t, srv.addr, "--name", "direct")

	data := patterned(2<<20+99, 1)
	writeFile(t, a.path("f"), data)
	if got, _ := exportFile(t, srv, "f"); len(got) != 0 {
		t.Fatalf("the export has %d bytes of f before any write-back", len(got))
	}
	before := scrapeProxyMessages(t, px)
	// A's open, relayed on A's own upstream connection, recalls f from the
	// proxy's connection as any other client's would.
	readWant(t, a.path("f"), data)
	if st, err := os.Stat(a.path("f")); err != nil || st.Size() != int64(len(data)) {
		t.Fatalf("stat f through the proxy: %v, %v; want size %d", st, err, len(data))
	}
	readWant(t, direct.path("f"), data)
	wantExport(t, srv, "f", data)
	// Counted: f written back once (each of its three 1 MiB blocks sent
	// once), whatever the recalls.
	wantRecalled(t, "f", before, scrapeProxyMessages(t, px), 0, 3)

	// A partial overwrite in the middle of a file written back.
	fh, err := os.OpenFile(a.path("f"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	patch := patterned(70000, 2)
	if _, err := fh.WriteAt(patch, 1<<20-1000); err != nil {
		t.Fatal(err)
	}
	if err := fh.Close(); err != nil {
		t.Fatal(err)
	}
	want := append([]byte(nil), data...)
	copy(want[1<<20-1000:], patch)
	readWant(t, a.path("f"), want)

	// Removed while dirty: never written back.
	writeFile(t, a.path("gone"), patterned(5000, 3))
	if err := os.Remove(a.path("gone")); err != nil {
		t.Fatal(err)
	}
	more := patterned(300000, 4)
	writeFile(t, a.path("g"), more)
	out := flushProxy(t, px)
	if !strings.Contains(out, "flushed proxy "+px.addr) {
		t.Errorf("coopfs flush --proxy printed %q; want a \"flushed proxy\" line", out)
	}
	wantExport(t, srv, "f", want)
	wantExport(t, srv, "g", more)
	if _, ok := exportFile(t, srv, "gone"); ok {
		t.Error("a file removed while dirty at the proxy reached the export")
	}
	readWant(t, direct.path("f"), want)
	readWant(t, a.path("g"), more)

	// A write-back mount behind the write-back proxy: its write-back lands
	// dirty at the proxy; a recall passes through both.
	b := startMount(t, px.addr, "--name", "B", "--write-policy", "write-back", "--write-back-delay", "1h",
		"--disk-cache", filepath.Join(t.TempDir(), "bcache"), "--disk-cache-size", "64MiB", "--disk-banks", "4", "--disk-assoc", "4")
	two := patterned(1<<20+5, 5)
	writeFile(t, b.path("h"), two)
	before = scrapeProxyMessages(t, px)
	readWant(t, direct.path("h"), two)
	wantExport(t, srv, "h", two)
	// Counted: B's write-back of h's two blocks to the proxy once, and the
	// proxy's of them upstream once.
	wantRecalled(t, "h", before, scrapeProxyMessages(t, px), 2, 2)
}

// proxyMessages are a proxy's messages of each type, received and sent.
type proxyMessages struct{ in, out map[string]float64 }

func scrapeProxyMessages(t *testing.T, px *e2eProxy) proxyMessages {
	t.Helper()
	ss := scrape(t, px.metrics)
	return proxyMessages{in: ss.SumBy(obs.MetricMessages, "type", map[string]string{"dir": obs.DirIn}),
		out: ss.SumBy(obs.MetricMessages, "type", map[string]string{"dir": obs.DirOut})}
}

// wantRecalled checks what a proxy exchanged while other clients' opens
// recalled file name from it: blocksIn WriteSeqs received (a write-back
// mount behind it writing the file back; 0: none behind it) and blocksOut
// sent upstream: each block once, however many recall messages went
// (the engine's TestRecallWritesBackOnce counts those per file).
func wantRecalled(t *testing.T, name string, before, after proxyMessages, blocksIn, blocksOut float64) {
	t.Helper()
	in, out := sentSince(before.in, after.in), sentSince(before.out, after.out)
	if in["WriteSeq"] != blocksIn || out["WriteSeq"] != blocksOut {
		t.Errorf("recall of %s: the proxy received %v WriteSeq and sent %v upstream; want %v and %v (received: %v; sent: %v)",
			name, in["WriteSeq"], out["WriteSeq"], blocksIn, blocksOut, in, out)
	} else {
		t.Logf("recall of %s: %v CallbackBreaks to the proxy, %v relayed to its clients; %v blocks in, %v out",
			name, in["CallbackBreak"], out["CallbackBreak"], blocksIn, blocksOut)
	}
}

// TestE2EProxyWriteBackCrash: a write-back proxy is SIGKILLed while it
// writes back, four times; restarted on the same cache directory it
// writes back every write acknowledged to its client, and the export then
// equals a reference copy written alongside.
func TestE2EProxyWriteBackCrash(t *testing.T) {
	needFUSE(t)
	srv := startServer(t, newExport(t), "--block-size", "64KiB")
	cacheDir := filepath.Join(t.TempDir(), "cache")
	addr, metrics := e2eFreeAddr(t), e2eFreeAddr(t)
	args := wbProxyArgs(cacheDir, "--write-back-delay", "50ms")
	px := startProxyAt(t, srv.addr, addr, metrics, args...)
	m := startMount(t, addr, "--name", "A", "--reconnect-timeout", "60s")
	ref := t.TempDir()
	const files = 6
	recovered := 0
	for round := 0; round < 4; round++ {
		for i := 0; i < 30; i++ {
			name := "f" + string(rune('0'+(i*7+round)%files))
			off := int64((i*37 + round*11) % 5 * 30000)
			p := patterned(20000+i*997, uint64(round*1000+i))
			for _, dir := range []string{m.dir, ref} {
				err := within(t, 60*time.Second, "write "+name, func() error {
					fh, err := os.OpenFile(filepath.Join(dir, name), os.O_RDWR|os.O_CREATE, 0o644)
					if err != nil {
						return err
					}
					defer fh.Close()
					if _, err := fh.WriteAt(p, off); err != nil {
						return err
					}
					if i%9 == 8 {
						if err := fh.Truncate(off + 5000); err != nil {
							return err
						}
					}
					return fh.Sync()
				})
				if err != nil {
					t.Fatal(err)
				}
			}
		}
		px.signal(syscall.SIGUSR1)
		time.Sleep(time.Duration(round*3) * time.Millisecond)
		px.cmd.Process.Kill()
		<-px.done
		px = startProxyAt(t, srv.addr, addr, metrics, args...)
		if strings.Contains(px.stderr.String(), "left dirty by the previous run") {
			recovered++
		}
	}
	t.Logf("%d of 4 restarts found dirty data left by the killed proxy", recovered)
	flushProxy(t, px)
	for i := 0; i < files; i++ {
		name := "f" + string(rune('0'+i))
		want, err := os.ReadFile(filepath.Join(ref, name))
		if err != nil {
			t.Fatal(err)
		}
		wantExport(t, srv, name, want)
		readWant(t, m.path(name), want)
	}
}

// TestE2EProxyWriteBackFull: a write-back proxy whose cache disk is full
// of dirty blocks gives its client ENOSPC (after reusing clean frames);
// what fitted is written back by a flush, and writes succeed again.
func TestE2EProxyWriteBackFull(t *testing.T) {
	needFUSE(t)
	srv := startServer(t, newExport(t), "--block-size", "64KiB")
	px := startProxy(t, srv.addr, "--write-policy", "write-back", "--disk-cache", filepath.Join(t.TempDir(), "cache"),
		"--disk-cache-size", "1MiB", "--disk-banks", "2", "--disk-assoc", "4", "--write-back-delay", "1h",
		"--write-back-high-water", "1")
	m := startMount(t, px.addr)
	clean := patterned(512<<10, 3)
	if err := os.WriteFile(filepath.Join(srv.export, "clean"), clean, 0o644); err != nil {
		t.Fatal(err)
	}
	readWant(t, m.path("clean"), clean) // clean frames at the proxy
	fh, err := os.OpenFile(m.path("f"), os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	var written int
	chunk := patterned(64<<10, 4)
	err = within(t, 30*time.Second, "fill the cache", func() error {
		for written < 64 {
			if _, err := fh.Write(chunk); err != nil {
				return err
			}
			written++
		}
		return nil
	})
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("after %d dirty 64 KiB blocks in a 1 MiB proxy cache: %v; want ENOSPC", written, err)
	}
	if written < 4 {
		t.Errorf("only %d blocks fitted before ENOSPC; a set holds 4", written)
	}
	fh.Close()
	flushProxy(t, px)
	got, _ := exportFile(t, srv, "f")
	if !bytes.Equal(got, bytes.Repeat(chunk, written)) {
		t.Errorf("export f: %d bytes; want the %d blocks written before ENOSPC", len(got), written)
	}
	writeFile(t, m.path("after"), []byte("room again"))
	flushProxy(t, px)
	wantExport(t, srv, "after", []byte("room again"))
}

// TestE2EProxyWriteBackCascade: client → write-back LAN proxy → WAN proxy
// → server. The LAN proxy's own connection (its write delegations, its
// write-back) goes through the WAN proxy; a client direct on the server
// opens the file after close and sees the data, recalled through both.
func TestE2EProxyWriteBackCascade(t *testing.T) {
	needFUSE(t)
	srv := startServer(t, newExport(t), "--recall-timeout", "10s")
	wan := startProxy(t, srv.addr, "--name", "wan")
	lan := startProxy(t, wan.addr, wbProxyArgs(filepath.Join(t.TempDir(), "cache"), "--write-back-delay", "1h", "--name", "lan")...)
	a := startMount(t, lan.addr, "--name", "A")
	direct := startMount(t, srv.addr, "--name", "direct")
	data := patterned(1<<20+7, 11)
	writeFile(t, a.path("f"), data)
	if got, _ := exportFile(t, srv, "f"); len(got) != 0 {
		t.Fatalf("the export has %d bytes of f before any write-back", len(got))
	}
	readWant(t, direct.path("f"), data)
	wantExport(t, srv, "f", data)
	more := patterned(70000, 12)
	writeFile(t, a.path("g"), more)
	flushProxy(t, lan)
	wantExport(t, srv, "g", more)
}
