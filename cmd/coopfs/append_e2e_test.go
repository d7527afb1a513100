package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// Appends from many clients: writer processes on several mounts, one
// behind a proxy, append lines to one file with O_APPEND; every write(2)
// must land whole, at the end of the file as the server sees it, and each
// writer's lines in its order.

// The test binary doubles as the append writer (a process of its own per
// writer, as the programs that append to a shared log are). init runs
// before TestMain, so the writer never starts the test machinery.
func init() {
	if w := os.Getenv("COOPFS_E2E_APPEND_WRITER"); w != "" {
		os.Exit(appendWriter(w, os.Getenv("COOPFS_E2E_APPEND_FILE"), os.Getenv("COOPFS_E2E_APPEND_LINES")))
	}
}

// appendLinesEnv sets the lines per writer of TestE2EAppendsFromManyMounts
// (default appendLinesDefault): COOPFS_E2E_APPEND_LINES=10000 for the long run.
const (
	appendLinesEnv     = "COOPFS_E2E_APPEND_LINES"
	appendLinesDefault = 1000
)

// appendWriter appends lines 0..n-1 of writer w (one letter) to path, one
// write(2) each, and returns the exit code.
func appendWriter(w, path, lines string) int {
	n, err := strconv.Atoi(lines)
	if err != nil || len(w) != 1 {
		fmt.Fprintf(os.Stderr, "append writer %q: bad line count %q or writer name\n", w, lines)
		return 2
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	for seq := range n {
		line := appendLine(w[0], seq)
		if k, err := f.Write(line); err != nil || k != len(line) {
			fmt.Fprintf(os.Stderr, "append line %d (%d bytes): wrote %d: %v\n", seq, len(line), k, err)
			return 1
		}
	}
	if err := f.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// appendLine is line seq of writer w: the writer's letter, the sequence
// number and a fill letter, ending in a newline; 10–210 bytes, every
// hundredth a large write of 4 KiB to 1 MiB (every third of those exactly
// 1 MiB), which the kernel would split at its pages.
func appendLine(w byte, seq int) []byte {
	r := rand.New(rand.NewPCG(uint64(w), uint64(seq)))
	n := 10 + r.IntN(201)
	if seq%100 == 99 {
		n = 4096 + r.IntN(1<<20-4096+1)
		if seq%300 == 299 {
			n = 1 << 20
		}
	}
	b := make([]byte, n)
	h := fmt.Appendf(b[:0], "%c%06d ", w, seq)
	for i := len(h); i < n-1; i++ {
		b[i] = 'a' + byte(seq%26)
	}
	b[n-1] = '\n'
	return b
}

// appendCheck is what checkAppends found in a file the writers appended to.
type appendCheck struct {
	lines, torn, disordered, missing int
	firstTorn                        string
}

// checkAppends checks that data is whole lines of the writers, each
// writer's n lines in its order.
func checkAppends(data []byte, writers string, n int) appendCheck {
	var c appendCheck
	next := map[byte]int{}
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			i = len(data) - 1
		}
		line := data[:i+1]
		data = data[i+1:]
		c.lines++
		seq, err := strconv.Atoi(string(line[1:min(len(line), 7)]))
		if len(line) < 8 || err != nil || !bytes.ContainsRune([]byte(writers), rune(line[0])) || !bytes.Equal(line, appendLine(line[0], seq)) {
			c.torn++
			if c.firstTorn == "" {
				c.firstTorn = string(line[:min(len(line), 60)])
			}
			continue
		}
		if seq != next[line[0]] {
			c.disordered++
		}
		next[line[0]] = seq + 1
	}
	for _, w := range []byte(writers) {
		c.missing += max(0, n-next[w])
	}
	return c
}

// appendLines is the lines per writer: COOPFS_E2E_APPEND_LINES or the default.
func appendLines(t *testing.T) int {
	t.Helper()
	s := os.Getenv(appendLinesEnv)
	if s == "" {
		return appendLinesDefault
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive number of lines", appendLinesEnv, s)
	}
	return n
}

// runAppendWriters runs one writer process per entry of paths (writer
// letters a, b, …) at once and waits for them all.
func runAppendWriters(t *testing.T, paths []string, n int) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(n/10+60)*time.Second)
	defer cancel()
	writers := ""
	errs := make(chan error, len(paths))
	for i, p := range paths {
		w := string(rune('a' + i))
		writers += w
		cmd := exec.CommandContext(ctx, self)
		cmd.Env = append(os.Environ(), "COOPFS_E2E_APPEND_WRITER="+w, "COOPFS_E2E_APPEND_FILE="+p, appendLinesEnv+"="+strconv.Itoa(n))
		go func() {
			out, err := cmd.CombinedOutput()
			if err != nil {
				err = fmt.Errorf("writer %s on %s: %v: %s", w, p, err, out)
			}
			errs <- err
		}()
	}
	for range paths {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	return writers
}

// TestE2EAppendsFromManyMounts: two writer processes on mount A, one on
// mount B and one on mount C behind a proxy append lines of 10–210 bytes
// (and some writes of up to 1 MiB) to one file with O_APPEND, under
// write-through and under write-back (mounts and proxy). Every line is
// whole in the export, each writer's in its order (the kernel sends each
// write(2) whole: FOPEN_DIRECT_IO; the server appends it at once); every
// mount reads what the export holds, also through an O_APPEND handle and
// its shared mmap.
func TestE2EAppendsFromManyMounts(t *testing.T) {
	needFUSE(t)
	n := appendLines(t)
	for _, wb := range []bool{false, true} {
		name := "write-through"
		if wb {
			name = "write-back"
		}
		t.Run(name, func(t *testing.T) {
			srv := startServer(t, newExport(t))
			flags := func(name string) []string {
				fl := []string{"--name", name}
				if wb {
					fl = append(fl, "--write-policy", "write-back", "--disk-cache", filepath.Join(t.TempDir(), "cache"),
						"--disk-cache-size", "256MiB", "--disk-banks", "4", "--disk-assoc", "4")
				}
				return fl
			}
			a := startMount(t, srv.addr, flags("A")...)
			b := startMount(t, srv.addr, flags("B")...)
			var px *e2eProxy
			if wb {
				px = startProxy(t, srv.addr, wbProxyArgs(filepath.Join(t.TempDir(), "pcache"))...)
			} else {
				px = startProxy(t, srv.addr)
			}
			c := startMount(t, px.addr, flags("C")...)
			start := time.Now()
			writers := runAppendWriters(t, []string{a.path("log"), a.path("log"), b.path("log"), c.path("log")}, n)
			took := time.Since(start)
			got := checkExportAppends(t, srv, writers, n, fmt.Sprintf("%s, %d writers × %d lines in %s", name, len(writers), n, took.Round(time.Millisecond)))
			if wb {
				// Nothing is left to write back: the appends are on the
				// server already, and stay whole after a flush.
				for _, m := range []*e2eMount{a, b, c} {
					flushMount(t, m)
				}
				flushProxy(t, px)
				if after := checkExportAppends(t, srv, writers, n, name+", after coopfs flush"); !bytes.Equal(after, got) {
					t.Errorf("a flush changed the export's log (%d bytes, %d before)", len(after), len(got))
				}
			}
			if t.Failed() {
				return
			}
			for _, m := range []*e2eMount{a, b, c} {
				wantFile(t, "log through "+m.name, m.path("log"), got)
				checkAppendHandle(t, m.path("log"), got)
			}
		})
	}
}

// checkExportAppends checks the export's log (checkAppends), logs what it
// found (what) and returns it.
func checkExportAppends(t *testing.T, srv *e2eServer, writers string, n int, what string) []byte {
	t.Helper()
	got, ok := exportFile(t, srv, "log")
	if !ok {
		t.Fatal("the export has no log after the writers")
	}
	ck := checkAppends(got, writers, n)
	t.Logf("%s: %d lines in the export, %d torn, %d out of order, %d missing", what, ck.lines, ck.torn, ck.disordered, ck.missing)
	if ck.torn != 0 || ck.disordered != 0 || ck.missing != 0 {
		t.Errorf("appends tore: %d of %d lines torn (the first: %q), %d out of order, %d missing",
			ck.torn, ck.lines, ck.firstTorn, ck.disordered, ck.missing)
	}
	return got
}

// checkAppendHandle reads path through an O_RDWR|O_APPEND handle (direct
// I/O) and its shared mmap, and compares both with want.
func checkAppendHandle(t *testing.T, path string, want []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, len(want)+1)
	k, err := f.ReadAt(buf, 0)
	if k != len(want) || !bytes.Equal(buf[:k], want) {
		t.Errorf("read %s through an O_APPEND handle: %d bytes (%v), want the %d the export holds", path, k, err, len(want))
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, len(want), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		t.Fatalf("shared mmap of an O_APPEND handle of %s: %v", path, err)
	}
	defer syscall.Munmap(m)
	if !bytes.Equal(m, want) {
		t.Errorf("the shared mmap of an O_APPEND handle of %s differs from the export", path)
	}
}

// TestE2EAppendAfterAnotherMount: mount A holds a file in its page cache
// (the last page partly); mount B appends; A appends too, through a
// handle whose kernel still sees the old size. A's append lands after B's
// on the server, and A's next open reads what the server holds — not its
// cached last page, nor the append at the offset its kernel named — under
// write-through and write-back.
func TestE2EAppendAfterAnotherMount(t *testing.T) {
	needFUSE(t)
	for _, wb := range []bool{false, true} {
		name := "write-through"
		if wb {
			name = "write-back"
		}
		t.Run(name, func(t *testing.T) {
			srv := startServer(t, newExport(t))
			var a, b *e2eMount
			if wb {
				a = wbMount(t, srv, filepath.Join(t.TempDir(), "a"), "--name", "A")
				b = wbMount(t, srv, filepath.Join(t.TempDir(), "b"), "--name", "B")
			} else {
				a = startMount(t, srv.addr, "--name", "A")
				b = startMount(t, srv.addr, "--name", "B")
			}
			first := patterned(8000, 1)
			mustWrite(t, a.path("log"), first)
			wantFile(t, "A's own file", a.path("log"), first)
			if _, err := os.Stat(a.path("log")); err != nil {
				t.Fatal(err)
			}
			want := append(append([]byte(nil), first...), patterned(5000, 2)...)
			appendTo(t, b.path("log"), want[len(first):])
			mine := []byte("A's line\n")
			appendTo(t, a.path("log"), mine)
			want = append(want, mine...)
			wantExport(t, srv, "log", want)
			wantFile(t, "A after its append", a.path("log"), want)
			wantFile(t, "B after A's append", b.path("log"), want)
		})
	}
}

// appendTo appends p to path with one write(2) on an O_APPEND handle.
func appendTo(t *testing.T, path string, p []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(p); err != nil {
		t.Fatalf("append to %s: %v", path, err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close %s after an append: %v", path, err)
	}
}
