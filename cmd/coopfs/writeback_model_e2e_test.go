package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// wbModelOps is how many random operations TestE2EWriteBackModel runs.
const wbModelOps = 100_000

// TestE2EWriteBackModel runs random operations — writes at random
// offsets, reads (some past the kernel's page cache), truncations, fsyncs,
// fstats, reopens, unlinks, renames over other dirty files, flushes by
// command and by signal — on a write-back mount with small blocks, and
// checks every read and size against a reference model in memory; after
// every flush the export must equal the model.
func TestE2EWriteBackModel(t *testing.T) {
	needFUSE(t)
	srv := startServer(t, newExport(t), "--block-size", "4KiB")
	m := wbMount(t, srv, filepath.Join(memDir(t), "cache"), "--write-back-delay", "200ms")
	runWBModel(t, wbModelTarget{m: m, export: srv.export, ops: wbModelOps, seed: 11,
		signal: func(int) { m.signal(syscall.SIGUSR1) },
		flush:  func(map[string]*os.File) { flushMount(t, m) }})
}

// wbProxyModelOps is how many random operations each case of
// TestE2EWriteBackProxyModel runs: through the proxy an operation costs
// about 40 ms on the loaded 2-CPU machine (30,000 took 25 minutes), so
// fewer than on a mount.
const wbProxyModelOps = 4_000

// TestE2EWriteBackProxyModel is the model workload of TestE2EWriteBackModel
// through a write-back proxy (client → write-back proxy → server): a
// write-back mount behind it, whose write-backs land dirty at the proxy
// (a flush is `coopfs flush` of the mount, then of the proxy), and a plain
// mount behind it, whose every write the proxy completes (a flush is an
// fsync of the open files, then `coopfs flush --proxy`). SIGUSR1 goes to
// the mount and the proxy in turn. After every flush the export must equal
// the model.
func TestE2EWriteBackProxyModel(t *testing.T) {
	needFUSE(t)
	for _, mountWB := range []bool{true, false} {
		name := "plain mount"
		if mountWB {
			name = "write-back mount"
		}
		t.Run(name, func(t *testing.T) {
			srv := startServer(t, newExport(t), "--block-size", "4KiB")
			px := startProxy(t, srv.addr, wbProxyArgs(filepath.Join(memDir(t), "pcache"), "--write-back-delay", "200ms")...)
			var extra []string
			if mountWB {
				extra = []string{"--write-policy", "write-back", "--disk-cache", filepath.Join(memDir(t), "cache"), "--disk-cache-size", "64MiB",
					"--disk-banks", "4", "--disk-assoc", "4", "--write-back-delay", "200ms"}
			}
			m := startMount(t, px.addr, extra...)
			runWBModel(t, wbModelTarget{m: m, export: srv.export, ops: wbProxyModelOps, seed: 13,
				signal: func(op int) {
					if op%100 == 0 && mountWB {
						m.signal(syscall.SIGUSR1)
					} else {
						px.signal(syscall.SIGUSR1)
					}
				},
				flush: func(open map[string]*os.File) {
					if mountWB {
						flushMount(t, m)
					} else {
						for name, f := range open {
							if err := f.Sync(); err != nil {
								t.Fatalf("fsync %s: %v", name, err)
							}
						}
					}
					flushProxy(t, px)
				}})
		})
	}
}

// wbModelTarget is where runWBModel plays: a mount, the export behind it,
// how many operations, and how to signal a write-back and to flush
// everything to the export (given the files open).
type wbModelTarget struct {
	m      *e2eMount
	export string
	ops    int
	seed   uint64
	signal func(op int)
	flush  func(open map[string]*os.File)
}

// runWBModel plays the random operations of TestE2EWriteBackModel on tg.
func runWBModel(t *testing.T, tg wbModelTarget) {
	const bs = 4096
	m, export := tg.m, tg.export
	r := rand.New(rand.NewPCG(tg.seed, 12))
	names := []string{"a", "b", "c", "d", "e", "f"}
	model := map[string][]byte{}
	open := map[string]*os.File{}
	defer func() {
		for _, f := range open {
			f.Close()
		}
	}()
	handle := func(name string) *os.File {
		if f, ok := open[name]; ok {
			return f
		}
		f, err := os.OpenFile(m.path(name), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatalf("open %s: %v", name, err)
		}
		if _, ok := model[name]; !ok {
			model[name] = nil
		}
		open[name] = f
		return f
	}
	closeFile := func(name string) {
		if f, ok := open[name]; ok {
			if err := f.Close(); err != nil {
				t.Fatalf("close %s: %v", name, err)
			}
			delete(open, name)
		}
	}
	checkExport := func(op int) {
		t.Helper()
		for _, name := range names {
			want, ok := model[name]
			got, err := os.ReadFile(filepath.Join(export, name))
			if !ok {
				if err == nil {
					t.Fatalf("op %d: %s is in the export but was removed", op, name)
				}
				continue
			}
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("op %d: export %s: %d bytes (%v); the model has %d", op, name, len(got), err, len(want))
			}
		}
	}
	start := time.Now()
	var trace []string // the last operations, shown on a failure
	defer func() {
		if t.Failed() {
			t.Logf("last operations:\n%s", bytes.Join(func() [][]byte {
				var out [][]byte
				for _, s := range trace[max(0, len(trace)-40):] {
					out = append(out, []byte(s))
				}
				return out
			}(), []byte("\n")))
		}
	}()
	for op := 0; op < tg.ops; op++ {
		name := names[r.IntN(len(names))]
		k := r.IntN(100)
		trace = append(trace, fmt.Sprintf("op %d: %s k=%d size=%d", op, name, k, len(model[name])))
		switch {
		case k < 45: // write
			f := handle(name)
			off := r.IntN(4 * bs)
			p := make([]byte, 1+r.IntN(bs+bs/2))
			for i := range p {
				p[i] = byte(r.Uint32())
			}
			if _, err := f.WriteAt(p, int64(off)); err != nil {
				t.Fatalf("op %d: write %s at %d: %v", op, name, off, err)
			}
			d := model[name]
			if end := off + len(p); end > len(d) {
				d = append(d, make([]byte, end-len(d))...)
			}
			copy(d[off:], p)
			model[name] = d
		case k < 75: // read
			f := handle(name)
			if r.IntN(4) == 0 {
				unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED) // read through the mount, not the page cache
			}
			off := r.IntN(5 * bs)
			buf := make([]byte, 1+r.IntN(2*bs))
			n, err := f.ReadAt(buf, int64(off))
			d := model[name]
			want := []byte{}
			if off < len(d) {
				want = d[off:min(len(d), off+len(buf))]
			}
			if (err != nil && n == len(buf)) || !bytes.Equal(buf[:n], want) {
				t.Fatalf("op %d: read %s [%d, +%d): %d bytes (%v); the model has %d bytes there", op, name, off, len(buf), n, err, len(want))
			}
		case k < 82: // fstat
			st, err := handle(name).Stat()
			if err != nil || st.Size() != int64(len(model[name])) {
				pst, perr := os.Stat(m.path(name))
				est, eerr := os.Stat(filepath.Join(export, name))
				t.Fatalf("op %d: fstat %s: %v, %v; the model has %d bytes (stat by path: %v %v; in the export: %v %v)",
					op, name, st, err, len(model[name]), pst, perr, est, eerr)
			}
		case k < 85: // truncate
			n := r.IntN(5 * bs)
			if err := handle(name).Truncate(int64(n)); err != nil {
				t.Fatalf("op %d: truncate %s to %d: %v", op, name, n, err)
			}
			d := model[name]
			if n <= len(d) {
				d = d[:n]
			} else {
				d = append(d, make([]byte, n-len(d))...)
			}
			model[name] = d
		case k < 89: // fsync
			if err := handle(name).Sync(); err != nil {
				t.Fatalf("op %d: fsync %s: %v", op, name, err)
			}
		case k < 94: // close (reopened by the next operation on it)
			closeFile(name)
		case k < 96: // unlink
			if _, ok := model[name]; !ok {
				continue
			}
			closeFile(name)
			if err := os.Remove(m.path(name)); err != nil {
				t.Fatalf("op %d: remove %s: %v", op, name, err)
			}
			delete(model, name)
		case k < 98: // rename over another file
			to := names[r.IntN(len(names))]
			if _, ok := model[name]; !ok || to == name {
				continue
			}
			closeFile(to)
			if err := os.Rename(m.path(name), m.path(to)); err != nil {
				t.Fatalf("op %d: rename %s %s: %v", op, name, to, err)
			}
			model[to] = model[name]
			delete(model, name)
			if f, ok := open[name]; ok {
				open[to] = f
				delete(open, name)
			}
		case k < 99 && op%50 == 0: // SIGUSR1
			tg.signal(op)
		default:
			if op%2500 != 0 {
				continue
			}
			tg.flush(open)
			checkExport(op)
		}
	}
	for name := range open {
		closeFile(name)
	}
	tg.flush(open)
	checkExport(tg.ops)
	t.Logf("%d operations in %v", tg.ops, time.Since(start).Round(time.Millisecond))
}

// memDir is a temporary directory in memory (/dev/shm) where there is one,
// else on disk: the exerciser checks what the mount shows, not durability
// (TestE2EWriteBackCrash does), and a rewrite of a dirty block that was
// synced syncs the disk cache again (internal/cache/disk), which on a
// loaded disk made three quarters of its time.
func memDir(t *testing.T) string {
	t.Helper()
	if st, err := os.Stat("/dev/shm"); err != nil || !st.IsDir() {
		return t.TempDir()
	}
	d, err := os.MkdirTemp("/dev/shm", "coopfs-e2e-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}
