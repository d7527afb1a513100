package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// wbMount mounts srv with --write-policy write-back on cacheDir.
func wbMount(t *testing.T, srv *e2eServer, cacheDir string, extra ...string) *e2eMount {
	t.Helper()
	args := append([]string{"--write-policy", "write-back", "--disk-cache", cacheDir, "--disk-cache-size", "64MiB",
		"--disk-banks", "4", "--disk-assoc", "4"}, extra...)
	return startMount(t, srv.addr, args...)
}

// flushMount runs `coopfs flush` on m and returns its output.
func flushMount(t *testing.T, m *e2eMount) string {
	t.Helper()
	p, code := runCoopfs(t, 60*time.Second, nil, "flush", m.dir)
	if code != 0 {
		t.Fatalf("coopfs flush %s: exit %d; stdout:\n%s\nstderr:\n%s", m.dir, code, p.stdout.String(), p.stderr.String())
	}
	return p.stdout.String()
}

// exportFile reads a file of the export directly.
func exportFile(t *testing.T, srv *e2eServer, name string) ([]byte, bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(srv.export, name))
	if errors.Is(err, os.ErrNotExist) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return b, true
}

func wantExport(t *testing.T, srv *e2eServer, name string, want []byte) {
	t.Helper()
	got, ok := exportFile(t, srv, name)
	if !ok || !bytes.Equal(got, want) {
		t.Errorf("export %s: %d bytes (exists %v); want the %d bytes written", name, len(got), ok, len(want))
	}
}

// TestE2EWriteBack: writes complete on the client; the writer sees its
// data and size while the server does not have it; `coopfs flush` writes
// it back and reports progress; truncation drops dirty data past the new
// size; a file renamed over or removed is never written back.
func TestE2EWriteBack(t *testing.T) {
	needFUSE(t)
	srv := startServer(t, newExport(t))
	m := wbMount(t, srv, filepath.Join(t.TempDir(), "cache"))

	data := patterned(3<<20+4321, 1)
	mustWrite(t, m.path("f"), data)
	if st, err := os.Stat(m.path("f")); err != nil || st.Size() != int64(len(data)) {
		t.Fatalf("stat on the writer: %v, %v; want size %d", st, err, len(data))
	}
	wantFile(t, "the writer reads its dirty data", m.path("f"), data)
	if got, _ := exportFile(t, srv, "f"); len(got) != 0 {
		t.Fatalf("the export has %d bytes of f before a flush; want none (write-back)", len(got))
	}

	// Truncation: dirty data past the new size is dropped, the rest kept.
	if err := os.Truncate(m.path("f"), 1<<20+10); err != nil {
		t.Fatal(err)
	}
	data = data[:1<<20+10]
	wantFile(t, "after truncate", m.path("f"), data)
	wantExport(t, srv, "f", data) // a setattr writes the file back first

	// Appends after the truncation, then a flush with progress.
	fh, err := os.OpenFile(m.path("f"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	tail := patterned(2<<20, 2)
	if _, err := fh.Write(tail); err != nil {
		t.Fatal(err)
	}
	if err := fh.Close(); err != nil {
		t.Fatal(err)
	}
	data = append(data, tail...)
	wantFile(t, "after append", m.path("f"), data)
	// An append lands at the end of the file as the server sees it: it
	// goes there at once, after the file's dirty data.
	wantExport(t, srv, "f", data)

	// Renamed over and removed files: their dirty data never lands.
	mustWrite(t, m.path("victim"), []byte("dirty, then renamed over"))
	mustWrite(t, m.path("gone"), []byte("dirty, then removed"))
	if err := os.WriteFile(filepath.Join(srv.export, "winner"), []byte("from the export"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(m.path("winner"), m.path("victim")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(m.path("gone")); err != nil {
		t.Fatal(err)
	}
	// A dirty file renamed is written back under its new name.
	mustWrite(t, m.path("moved"), []byte("dirty, then moved"))
	if err := os.Mkdir(m.path("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(m.path("moved"), m.path("d", "moved")); err != nil {
		t.Fatal(err)
	}

	out := flushMount(t, m)
	if !strings.Contains(out, "flushing "+m.dir) || !strings.Contains(out, "flushed "+m.dir+": 1 files") {
		t.Errorf("coopfs flush output:\n%s\nwant progress lines and 1 file flushed (d/moved; f's append is on the server already)", out)
	}
	wantExport(t, srv, "f", data)
	wantExport(t, srv, "victim", []byte("from the export"))
	wantExport(t, srv, "d/moved", []byte("dirty, then moved"))
	if _, ok := exportFile(t, srv, "gone"); ok {
		t.Error("a removed dirty file reappeared in the export")
	}
	wantFile(t, "after the flush", m.path("f"), data)
	if out := flushMount(t, m); !strings.Contains(out, ": 0 files") {
		t.Errorf("a second flush: %s; want nothing left", out)
	}

	// SIGUSR1 flushes too, with progress in the mount's log.
	mustWrite(t, m.path("sig"), []byte("flushed by a signal"))
	m.signal(syscall.SIGUSR1)
	m.waitStderr(t, "write-back: flushed", 20*time.Second)
	wantExport(t, srv, "sig", []byte("flushed by a signal"))

	// The background flusher: a short --write-back-delay writes back alone.
	m.cleanup(t)
	m = wbMount(t, srv, filepath.Join(t.TempDir(), "cache2"), "--write-back-delay", "100ms")
	mustWrite(t, m.path("bg"), []byte("written back in the background"))
	deadline := time.Now().Add(20 * time.Second)
	for {
		if got, _ := exportFile(t, srv, "bg"); string(got) == "written back in the background" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the background flusher did not write bg back within 20s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestE2EWritePolicyReadOnly: a read-only mount reads, and every change
// fails with EROFS.
func TestE2EWritePolicyReadOnly(t *testing.T) {
	needFUSE(t)
	srv := startServer(t, newExport(t))
	if err := os.WriteFile(filepath.Join(srv.export, "f"), []byte("read me"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := startMount(t, srv.addr, "--write-policy", "read-only")
	wantFile(t, "read-only mount", m.path("f"), []byte("read me"))
	for what, err := range map[string]error{
		"write":  os.WriteFile(m.path("f"), []byte("x"), 0o644),
		"create": os.WriteFile(m.path("new"), []byte("x"), 0o644),
		"mkdir":  os.Mkdir(m.path("d"), 0o755),
		"remove": os.Remove(m.path("f")),
	} {
		if !errors.Is(err, syscall.EROFS) {
			t.Errorf("%s on a read-only mount: %v; want EROFS", what, err)
		}
	}
	p, code := runCoopfs(t, 10*time.Second, nil, "mount", "--server", srv.addr, "--write-policy", "write-back", newMountpoint(t))
	wantOneLineError(t, p, code, "coopfs mount:", "--disk-cache")
	p, code = runCoopfs(t, 10*time.Second, nil, "mount", "--server", srv.addr, "--write-policy", "writeback", newMountpoint(t))
	if code == 0 || !strings.Contains(p.stderr.String(), "use read-only, write-through or write-back") {
		t.Errorf("--write-policy writeback: exit %d, stderr:\n%s", code, p.stderr.String())
	}
}

// TestE2EWriteBackFull: a writer that fills a set of the write-back
// cache with dirty frames (clean frames are reused first) does not fail:
// the mount writes back what is dirty, which frees the frames, and the
// write goes on; everything reaches the export.
func TestE2EWriteBackFull(t *testing.T) {
	needFUSE(t)
	srv := startServer(t, newExport(t), "--block-size", "64KiB")
	// 1 MiB of 64 KiB blocks: 16 frames, 2 banks of 2 sets of 4 ways; no
	// background write-back before the cache is full.
	m := startMount(t, srv.addr, "--write-policy", "write-back", "--disk-cache", filepath.Join(t.TempDir(), "cache"),
		"--disk-cache-size", "1MiB", "--disk-banks", "2", "--disk-assoc", "4", "--write-back-delay", "1h",
		"--write-back-high-water", "1")
	clean := patterned(512<<10, 3)
	if err := os.WriteFile(filepath.Join(srv.export, "clean"), clean, 0o644); err != nil {
		t.Fatal(err)
	}
	wantFile(t, "clean file", m.path("clean"), clean) // 8 clean frames
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
	if err != nil {
		t.Fatalf("after %d dirty 64 KiB blocks in a 1 MiB cache: %v; want the mount to make room", written, err)
	}
	// Small files, a frame each (how git stores objects).
	for i := range 40 {
		mustWrite(t, m.path(fmt.Sprintf("small%d", i)), []byte(fmt.Sprintf("small file %d", i)))
	}
	if err := fh.Close(); err != nil {
		t.Fatal(err)
	}
	flushMount(t, m)
	wantExport(t, srv, "f", bytes.Repeat(chunk, written))
	for i := range 40 {
		wantExport(t, srv, fmt.Sprintf("small%d", i), []byte(fmt.Sprintf("small file %d", i)))
	}
}

// TestE2EWriteBackCrash: a write-back mount is SIGKILLed while it writes
// back; a new mount on the same cache directory writes back every write
// acknowledged by fsync or close, and the export then equals a reference
// copy written alongside.
func TestE2EWriteBackCrash(t *testing.T) {
	needFUSE(t)
	srv := startServer(t, newExport(t), "--block-size", "64KiB")
	cacheDir := filepath.Join(t.TempDir(), "cache")
	ref := t.TempDir()
	const files = 6
	for round := 0; round < 4; round++ {
		m := wbMount(t, srv, cacheDir, "--write-back-delay", "50ms")
		for i := 0; i < 40; i++ {
			name := "f" + string(rune('0'+(i*7+round)%files))
			off := int64((i*37 + round*11) % 5 * 30000)
			p := patterned(20000+i*997, uint64(round*1000+i))
			for _, dir := range []string{m.dir, ref} {
				fh, err := os.OpenFile(filepath.Join(dir, name), os.O_RDWR|os.O_CREATE, 0o644)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := fh.WriteAt(p, off); err != nil {
					t.Fatal(err)
				}
				if i%9 == 8 {
					if err := fh.Truncate(off + 5000); err != nil {
						t.Fatal(err)
					}
				}
				if err := fh.Sync(); err != nil {
					t.Fatal(err)
				}
				if err := fh.Close(); err != nil {
					t.Fatal(err)
				}
			}
		}
		// Kill it while it writes back: a flush is asked for and the
		// background flusher runs every 50 ms.
		m.signal(syscall.SIGUSR1)
		time.Sleep(time.Duration(round*3) * time.Millisecond)
		m.cmd.Process.Kill()
		<-m.done
		exec.Command("fusermount3", "-u", "-z", m.dir).Run()
	}
	m := wbMount(t, srv, cacheDir)
	flushMount(t, m)
	for i := 0; i < files; i++ {
		name := "f" + string(rune('0'+i))
		want, err := os.ReadFile(filepath.Join(ref, name))
		if err != nil {
			t.Fatal(err)
		}
		wantExport(t, srv, name, want)
		wantFile(t, "read back after the crashes", m.path(name), want)
	}
}

// TestE2EWriteBackRecall: another client's open of a file a write-back
// client holds unflushed writes to recalls them (the holder writes the
// file back first) and sees the data; when the holder does not answer,
// the open fails with EIO after the recall timeout, or reads the last
// version written back under --recall-timeout-policy stale; the holder,
// back, writes its data back and the file opens again.
func TestE2EWriteBackRecall(t *testing.T) {
	needFUSE(t)
	for _, policy := range []string{"eio", "stale"} {
		t.Run(policy, func(t *testing.T) {
			srv := startServer(t, newExport(t), "--recall-timeout", "1s", "--recall-timeout-policy", policy)
			a := wbMount(t, srv, filepath.Join(t.TempDir(), "cache"), "--name", "A", "--write-back-delay", "1h")
			b := startMount(t, srv.addr, "--name", "B")
			data := patterned(2<<20+99, 5)
			mustWrite(t, a.path("f"), data)
			if got, _ := exportFile(t, srv, "f"); len(got) != 0 {
				t.Fatalf("the export has %d bytes of f before any recall", len(got))
			}
			wantFile(t, "B opens a file A holds dirty", b.path("f"), data)
			wantExport(t, srv, "f", data)
			more := patterned(4096, 6)
			fh, err := os.OpenFile(a.path("f"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fh.Write(more); err != nil {
				t.Fatal(err)
			}
			fh.Close()
			data = append(data, more...)
			wantFile(t, "B opens again after A appended", b.path("f"), data)

			// A stops answering while it holds g dirty.
			mustWrite(t, a.path("g"), []byte("unflushed"))
			a.signal(syscall.SIGSTOP)
			waitStopped(t, a.cmd.Process.Pid)
			_, err = os.ReadFile(b.path("g"))
			if policy == "eio" {
				if !errors.Is(err, syscall.EIO) {
					t.Errorf("B opens g while A is stopped: %v; want EIO", err)
				}
			} else if err != nil {
				t.Errorf("B opens g while A is stopped, stale policy: %v; want the last version written back", err)
			}
			a.signal(syscall.SIGCONT)
			// A comes back, declares g again and is recalled.
			deadline := time.Now().Add(30 * time.Second)
			for {
				got, err := os.ReadFile(b.path("g"))
				if err == nil && string(got) == "unflushed" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("B after A came back: %q, %v; want A's data", got, err)
				}
				time.Sleep(200 * time.Millisecond)
			}
		})
	}
}

// waitStopped waits until every thread of process pid is stopped (a
// SIGSTOP takes effect asynchronously).
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		stopped := len(tasks) > 0
		for _, task := range tasks {
			b, err := os.ReadFile(task)
			// The state follows the parenthesised command name.
			if i := bytes.LastIndexByte(b, ')'); err == nil && i >= 0 && i+2 < len(b) && b[i+2] != 'T' {
				stopped = false
			}
		}
		if stopped {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d not stopped within 10s of SIGSTOP", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
