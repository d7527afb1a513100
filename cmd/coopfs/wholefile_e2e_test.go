package main

// End-to-end cases of the wholefile policy (issue 12): real server and
// mount processes, real FUSE, real TCP between the clients.

import (
	"bytes"
	"crypto/sha256"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// startWholeMount mounts a wholefile server with a disk cache in cache
// (a new one if empty) and every file handled whole.
func startWholeMount(t *testing.T, addr, name, cache string, extra ...string) *e2eMount {
	t.Helper()
	if cache == "" {
		cache = filepath.Join(t.TempDir(), "cache")
	}
	args := append([]string{"--name", name, "--disk-cache", cache, "--disk-cache-size", "256MiB", "--wholefile-min-size", "0"}, extra...)
	return startMount(t, addr, args...)
}

// TestE2EWholeFileFigure1 is seed 001's figure 1 with three clients: c1
// and c2 open a 4 KB file and read it, c1 writes "X" at 0 and closes, c2
// writes "Y" at 1 and closes, c3 opens and reads "XY".
func TestE2EWholeFileFigure1(t *testing.T) {
	needFUSE(t)
	srv := startServer(t, newExport(t), "--policy", "wholefile")
	mustWrite(t, filepath.Join(srv.export, "f"), bytes.Repeat([]byte("."), 4096))
	c1 := startWholeMount(t, srv.addr, "c1", "")
	c2 := startWholeMount(t, srv.addr, "c2", "")
	c3 := startWholeMount(t, srv.addr, "c3", "")
	f1, err := os.OpenFile(c1.path("f"), os.O_RDWR, 0) // t=1
	if err != nil {
		t.Fatal(err)
	}
	f2, err := os.OpenFile(c2.path("f"), os.O_RDWR, 0) // t=2
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for i, f := range []*os.File{f1, f2} { // t=3, t=4
		if n, err := f.ReadAt(buf, 0); n != 4096 || buf[0] != '.' {
			t.Fatalf("c%d read %d bytes (%v)", i+1, n, err)
		}
	}
	if _, err := f1.WriteAt([]byte("X"), 0); err != nil { // t=5
		t.Fatal(err)
	}
	if err := f1.Close(); err != nil { // t=6
		t.Fatal(err)
	}
	if _, err := f2.WriteAt([]byte("Y"), 1); err != nil { // t=7
		t.Fatal(err)
	}
	if err := f2.Close(); err != nil { // t=8
		t.Fatal(err)
	}
	f3, err := os.Open(c3.path("f")) // t=9
	if err != nil {
		t.Fatal(err)
	}
	defer f3.Close()
	got := make([]byte, 2)
	if n, err := f3.ReadAt(got, 0); n != 2 || string(got) != "XY" { // t=10
		t.Fatalf("c3 read %q (%d bytes, %v), want \"XY\"", got[:n], n, err)
	}
	// The writers see the committed file too.
	for _, c := range []*e2eMount{c1, c2} {
		want := append([]byte("XY"), bytes.Repeat([]byte("."), 4094)...)
		wantFile(t, "a writer reopens", c.path("f"), want)
	}
}

// TestE2EWholeFilePeerDies: two clients hold a 48 MiB file; a third
// fetches it from both, and one holder is killed (SIGKILL) as the fetch
// starts: the third reads the right bytes (its segment is fetched from the
// other holder or the server). A holder restarted with a stale copy (the
// file changed while it was down) reads the new content, and so do the
// others.
func TestE2EWholeFilePeerDies(t *testing.T) {
	needFUSE(t)
	srvMetrics := e2eFreeAddr(t)
	srv := startServer(t, newExport(t), "--policy", "wholefile", "--metrics", srvMetrics)
	data := patterned(48<<20, 12)
	mustWrite(t, filepath.Join(srv.export, "f"), data)
	cacheA := filepath.Join(t.TempDir(), "cache")
	a := startWholeMount(t, srv.addr, "A", cacheA)
	b := startWholeMount(t, srv.addr, "B", "")
	wantFile(t, "A reads from the server", a.path("f"), data)
	wantFile(t, "B reads", b.path("f"), data)
	if n := scrape(t, srvMetrics).Sum("coopfs_wholefile_haves_total", nil); n < 2 {
		t.Errorf("%v clients joined the map, want 2", n)
	}

	cMetrics := e2eFreeAddr(t)
	c := startWholeMount(t, srv.addr, "C", "", "--metrics", cMetrics)
	done := make(chan []byte, 1)
	go func() {
		got, _ := os.ReadFile(c.path("f"))
		done <- got
	}()
	time.Sleep(20 * time.Millisecond)
	b.signal(syscall.SIGKILL)
	<-b.done
	exec.Command("fusermount3", "-u", "-z", b.dir).Run() // its mount died with it
	var got []byte
	select {
	case got = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("C's read did not finish within 60 s of a holder's death")
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("C read %d bytes, sha256 %x; want %d bytes, sha256 %x", len(got), sha256.Sum256(got), len(data), sha256.Sum256(data))
	}
	cm := scrape(t, cMetrics)
	t.Logf("C: peer chunks %v, server chunks %v, peer failures %v", cm.Sum("coopfs_wholefile_segments_total", map[string]string{"source": "peer"}),
		cm.Sum("coopfs_wholefile_segments_total", map[string]string{"source": "server"}), cm.Sum("coopfs_wholefile_peer_failures_total", nil))

	// A restarts with a copy that goes stale while it is down.
	a.signal(syscall.SIGTERM)
	if code := a.mustExit(t, 10*time.Second); code != 0 {
		t.Fatalf("A exited %d", code)
	}
	next := patterned(48<<20, 13)
	mustWrite(t, c.path("f"), next)
	a2 := startWholeMount(t, srv.addr, "A again", cacheA)
	wantFile(t, "A after restart with a stale copy", a2.path("f"), next)
	wantFile(t, "C rereads", c.path("f"), next)
	d := startWholeMount(t, srv.addr, "D", "")
	wantFile(t, "D reads from the holders", d.path("f"), next)
}
