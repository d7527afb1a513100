package main

// End-to-end bad-input cases (issue 2, "Bad input"): each wants a clear
// one-line error on stderr and a non-zero exit, or, for a live system, that
// the server keeps serving and nothing hangs.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/wire"
)

// runCoopfs runs coopfs to completion (bounded by d) and returns the process
// and its exit code. cred, when not nil, runs it as another user.
// e2eSecret is the e2e cluster secret, as the commands read it.
func e2eSecret(t *testing.T) string {
	b, err := os.ReadFile(e2e.secret)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func runCoopfs(t *testing.T, d time.Duration, cred *syscall.Credential, args ...string) (*e2eProc, int) {
	t.Helper()
	p := startProcAs(t, "coopfs "+args[0], cred, args...)
	code, ok := p.wait(d)
	if !ok {
		p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("%s did not exit within %s; stderr:\n%s", p.name, d, p.stderr.String())
	}
	return p, code
}

// TestE2EServeBadExport: a missing, non-directory or unreadable export is a
// one-line error and exit 1.
func TestE2EServeBadExport(t *testing.T) {
	needBinary(t)
	addr := e2eFreeAddr(t)
	t.Run("Missing", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "nope")
		p, code := runCoopfs(t, 10*time.Second, nil, "serve", "--export", dir, "--listen", addr)
		wantOneLineError(t, p, code, "coopfs serve:", dir)
	})
	t.Run("NotADirectory", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "file")
		mustWrite(t, file, []byte("x"))
		p, code := runCoopfs(t, 10*time.Second, nil, "serve", "--export", file, "--listen", addr)
		wantOneLineError(t, p, code, "coopfs serve:", file, "not a directory")
	})
	t.Run("Unreadable", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root to run the server as another user (root reads any directory)")
		}
		// Under the 0755 e2e directory, so that only the export's own
		// mode stops user nobody.
		dir, err := os.MkdirTemp(filepath.Dir(e2e.base), "export-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.Chmod(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		p, code := runCoopfs(t, 10*time.Second, &syscall.Credential{Uid: 65534, Gid: 65534},
			"serve", "--export", dir, "--listen", addr)
		wantOneLineError(t, p, code, "coopfs serve:", dir, "permission denied")
	})
	t.Run("NoExportFlag", func(t *testing.T) {
		p, code := runCoopfs(t, 10*time.Second, nil, "serve", "--listen", addr)
		wantOneLineError(t, p, code, "coopfs serve:", "--export")
	})
}

// TestE2EServePortInUse: a listen address already taken is a one-line error.
func TestE2EServePortInUse(t *testing.T) {
	needBinary(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p, code := runCoopfs(t, 10*time.Second, nil, "serve", "--export", t.TempDir(), "--listen", ln.Addr().String())
	wantOneLineError(t, p, code, "coopfs serve:", ln.Addr().String(), "in use")
}

// TestE2EMountBadMountpoint: a mount point that is missing, not a directory
// or already a mount is refused with one line, and nothing is mounted.
func TestE2EMountBadMountpoint(t *testing.T) {
	needFUSE(t)
	srv := startServer(t, newExport(t))
	t.Run("Missing", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "nope")
		p, code := runCoopfs(t, 10*time.Second, nil, "mount", "--server", srv.addr, dir)
		wantOneLineError(t, p, code, "coopfs mount:", dir, "does not exist")
	})
	t.Run("NotADirectory", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "file")
		mustWrite(t, file, []byte("x"))
		p, code := runCoopfs(t, 10*time.Second, nil, "mount", "--server", srv.addr, file)
		wantOneLineError(t, p, code, "coopfs mount:", file, "not a directory")
	})
	t.Run("AlreadyMounted", func(t *testing.T) {
		m := startMount(t, srv.addr)
		p, code := runCoopfs(t, 10*time.Second, nil, "mount", "--server", srv.addr, m.dir)
		wantOneLineError(t, p, code, "coopfs mount:", m.dir, "already a mount")
		// The first mount is untouched.
		mustWrite(t, m.path("still-works"), []byte("yes"))
		wantFile(t, "first mount after the refused one", m.path("still-works"), []byte("yes"))
		if n := len(e2eMountsUnder(m.dir)); n != 1 {
			t.Errorf("%d mounts at %s, want 1", n, m.dir)
		}
	})
}

// TestE2EMountServerUnreachable: mounting a server that is not there says
// it is retrying, then gives up with one line after --reconnect-timeout.
func TestE2EMountServerUnreachable(t *testing.T) {
	needFUSE(t)
	addr := e2eFreeAddr(t) // nothing listens here
	dir := newMountpoint(t)
	p, code := runCoopfs(t, 20*time.Second, nil, "mount", "--server", addr, "--reconnect-timeout", "2s", dir)
	if !strings.Contains(p.stderr.String(), "retrying") {
		t.Errorf("no retry message on stderr:\n%s", p.stderr.String())
	}
	wantOneLineError(t, p, code, "coopfs mount:", addr, "unreachable")
	if e2eIsMounted(dir) {
		t.Errorf("%s is mounted after a failed mount", dir)
	}
}

// TestE2EWrongSecret: a client with another secret, or none, is rejected;
// both ends say so, and the server goes on serving the right clients.
func TestE2EWrongSecret(t *testing.T) {
	needFUSE(t)
	tmp := t.TempDir()
	good, bad := filepath.Join(tmp, "good"), filepath.Join(tmp, "bad")
	mustWrite(t, good, []byte("the-right-cluster-secret-0123456789\n"))
	mustWrite(t, bad, []byte("some-other-cluster-secret-0123456789\n"))
	srv := startServer(t, newExport(t), "--secret-file", good)

	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"OtherSecret", []string{"--secret-file", bad}, []string{"authentication failed"}},
		{"NoSecret", []string{"--secret-file="}, []string{"no credentials", "coopfs secret", "--insecure"}},
		{"Insecure", []string{"--insecure"}, []string{"requires TLS", "--insecure"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := newMountpoint(t)
			args := append([]string{"mount", "--server", srv.addr, "--reconnect-timeout", "2s"}, c.args...)
			p, code := runCoopfs(t, 20*time.Second, nil, append(args, dir)...)
			wantOneLineError(t, p, code, "coopfs mount:", c.want...)
			if e2eIsMounted(dir) {
				t.Errorf("%s is mounted with the wrong secret", dir)
			}
		})
	}
	srv.waitStderr(t, "authentication failed", 5*time.Second)
	if srv.exited() {
		t.Fatalf("server exited after rejecting clients; stderr:\n%s", srv.stderr.String())
	}
	m := startMount(t, srv.addr, "--secret-file", good)
	mustWrite(t, m.path("ok"), []byte("authenticated"))
	wantFile(t, "client with the right secret", m.path("ok"), []byte("authenticated"))
}

// TestE2EBadFrames: garbage, an oversized frame and a malformed one, sent
// by a raw TCP client before and after the handshake, get the connection
// closed; the server keeps serving a mounted client.
func TestE2EBadFrames(t *testing.T) {
	needFUSE(t)
	srv := startServer(t, newExport(t))
	m := startMount(t, srv.addr)
	mustWrite(t, m.path("before"), []byte("before"))

	header := func(typ byte, flags byte, metaLen, dataLen uint32) []byte {
		h := make([]byte, wire.HeaderSize)
		binary.LittleEndian.PutUint16(h[0:], 0xCF57)
		h[2], h[3] = typ, flags
		binary.LittleEndian.PutUint32(h[4:], metaLen)
		binary.LittleEndian.PutUint32(h[8:], dataLen)
		binary.LittleEndian.PutUint64(h[16:], 1)
		return h
	}
	garbage := make([]byte, 4096)
	rand.Read(garbage)
	cases := []struct {
		name      string
		handshake bool
		send      []byte
	}{
		{"GarbageFirst", false, garbage},
		{"HTTPRequest", false, []byte("GET /metrics HTTP/1.1\r\nHost: coopfs\r\n\r\n")},
		{"OversizedBeforeHandshake", false, header(1, 0, 1<<31, 1<<31)},
		{"Oversized", true, header(1, 0, 1<<30, 0)},
		{"OversizedData", true, header(1, 0, 0, 1<<31)},
		{"Garbage", true, garbage},
		{"UnknownType", true, append(header(250, 0, 4, 0), 1, 2, 3, 4)},
		{"BadChecksum", true, append(header(1, 0, 0, 8), []byte("12345678")...)},
		{"TruncatedMeta", true, append(header(1, 0, 64, 0), bytes.Repeat([]byte{0xff}, 64)...)},
	}
	// The start of a TLS record and nothing more (a half-open or slow
	// handshake): the server waits for the rest, bounded by the handshake
	// timeout (10s). Checked at the end, so that the wait overlaps the
	// other cases.
	short, err := net.DialTimeout("tcp", srv.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer short.Close()
	short.Write([]byte{0x16, 3, 1})
	shortSent := time.Now()

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			nc, err := net.DialTimeout("tcp", srv.addr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			if c.handshake {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				sec := wire.MustSecurity(wire.SecurityConfig{Secret: []byte(e2eSecret(t))})
				hs, err := wire.ClientHandshake(ctx, nc, sec, "", wire.Hello{Role: wire.RoleClient, Name: "raw-" + c.name})
				if err != nil {
					t.Fatalf("handshake: %v", err)
				}
				nc = hs.Conn // the bad frames travel inside TLS
			}
			nc.SetDeadline(time.Now().Add(8 * time.Second))
			nc.Write(c.send) // may fail if the server already closed
			// The server must close the connection: reading ends with
			// EOF or a reset, not a timeout. It may first send an error
			// frame; read everything until the end.
			_, err = io.Copy(io.Discard, nc)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("server kept the connection open for 8s after %s", c.name)
			}
			// The mounted client is still served.
			p := m.path("after-" + c.name)
			mustWrite(t, p, []byte(c.name))
			wantFile(t, "mounted client after "+c.name, p, []byte(c.name))
		})
	}
	short.SetDeadline(shortSent.Add(wire.HandshakeTimeout + 5*time.Second))
	if _, err := io.Copy(io.Discard, short); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Errorf("a connection that sent %d bytes of garbage is still open %s later", 8, time.Since(shortSent).Round(time.Second))
		}
	}
	if srv.exited() {
		t.Fatalf("server exited; stderr:\n%s", srv.stderr.String())
	}
	wantFile(t, "file written before the bad frames", m.path("before"), []byte("before"))
	if n := strings.Count(srv.stderr.String(), "rejected a connection"); n < 4 {
		t.Errorf("server logged %d rejected connections, want one per bad connection before the handshake (4)", n)
	}
}

// TestE2EServerRestart: the server stops (SIGKILL, then a clean SIGTERM)
// and starts again on the same address under a mounted client. Open files
// keep working or fail with EIO, within a bound; new opens work once the
// server is back.
func TestE2EServerRestart(t *testing.T) {
	needFUSE(t)
	export := newExport(t)
	addr := e2eFreeAddr(t)
	srv := startServerAt(t, addr, export)
	m := startMount(t, addr, "--reconnect-timeout", "10s")
	// Large enough that the block read during the outage is beyond the
	// client's read-ahead of the first reads.
	data := patterned(12<<20, 60)
	mustWrite(t, filepath.Join(export, "f"), data)

	outer := t // the restarted server outlives each subtest
	for round, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			rf, err := os.Open(m.path("f"))
			if err != nil {
				t.Fatal(err)
			}
			defer rf.Close()
			head := make([]byte, 1<<20)
			if _, err := io.ReadFull(rf, head); err != nil {
				t.Fatal(err)
			}
			wname := "w" + sig.String()
			wf, err := os.Create(m.path(wname))
			if err != nil {
				t.Fatal(err)
			}
			defer wf.Close()
			if _, err := wf.Write([]byte("first ")); err != nil {
				t.Fatal(err)
			}

			srv.signal(sig)
			if _, ok := srv.wait(10 * time.Second); !ok {
				t.Fatalf("server did not exit on %v", sig)
			}
			// While the server is down, a read of an unread block is
			// issued; it must end (data or EIO) once the server is back.
			readDone := make(chan error, 1)
			rest := make([]byte, 2<<20)
			go func() {
				_, err := rf.ReadAt(rest, 10<<20)
				readDone <- err
			}()
			time.Sleep(300 * time.Millisecond)
			srv = startServerAt(outer, addr, export)

			select {
			case err := <-readDone:
				switch {
				case err == nil || err == io.EOF:
					if !bytes.Equal(rest, data[10<<20:]) {
						t.Errorf("read across the restart returned wrong data (%s)", brief(rest))
					}
				case errors.Is(err, syscall.EIO):
					t.Logf("read across the restart: EIO (allowed)")
				default:
					t.Errorf("read across the restart: %v, want data or EIO", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("read across the server restart still blocked after 20s (hang)")
			}
			werr := within(t, 20*time.Second, "write+close across the restart", func() error {
				if _, err := wf.Write([]byte("second")); err != nil {
					return err
				}
				return wf.Close()
			})
			switch {
			case werr == nil:
				wantFile(t, "file written across the restart", m.path(wname), []byte("first second"))
			case errors.Is(werr, syscall.EIO):
				t.Logf("write across the restart: EIO (allowed)")
			default:
				t.Errorf("write across the restart: %v, want success or EIO", werr)
			}
			// New opens work.
			wantFile(t, "reopen after the restart", m.path("f"), data)
			p := m.path("new" + sig.String())
			if err := within(t, 20*time.Second, "create after restart", func() error {
				return os.WriteFile(p, []byte("new"), 0o644)
			}); err != nil {
				t.Fatalf("create after the restart: %v", err)
			}
			wantFile(t, "new file after the restart", p, []byte("new"))
			if !strings.Contains(m.stderr.String(), "connected to server") {
				t.Errorf("mount did not log a reconnection (round %d); stderr:\n%s", round, m.stderr.String())
			}
		})
	}
	if m.exited() {
		t.Fatalf("mount process exited; stderr:\n%s", m.stderr.String())
	}
}

// TestE2EServerGoneLonger: with the server away for longer than
// --reconnect-timeout, operations fail (never hang); when it is back, the
// same mount works again.
func TestE2EServerGoneLonger(t *testing.T) {
	needFUSE(t)
	export := newExport(t)
	addr := e2eFreeAddr(t)
	srv := startServerAt(t, addr, export)
	m := startMount(t, addr, "--reconnect-timeout", "1s", "--attr-timeout", "0s")
	mustWrite(t, m.path("f"), []byte("data"))
	srv.signal(syscall.SIGKILL)
	srv.wait(10 * time.Second)
	// Until the mount has seen its connection end it answers from what its
	// callbacks cover (a name absent from a listing it holds: ENOENT), as
	// any callback holder does; from then on nothing cached is trusted.
	m.waitStderr(t, "lost the connection to the server", 10*time.Second)

	err := within(t, 15*time.Second, "read with the server gone", func() error {
		_, err := os.ReadFile(m.path("g-never-seen"))
		return err
	})
	if err == nil {
		t.Fatalf("read of an unknown file with the server gone succeeded")
	}
	if !errors.Is(err, syscall.EIO) && !errors.Is(err, syscall.ENOTCONN) && !errors.Is(err, syscall.ETIMEDOUT) {
		t.Errorf("operation with the server gone: %v, want EIO", err)
	}
	t.Logf("with the server gone: %v", err)
	startServerAt(t, addr, export)
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := within(t, 15*time.Second, "read after the server is back", func() error {
			b, err := os.ReadFile(m.path("f"))
			if err == nil && string(b) != "data" {
				err = errors.New("wrong data " + string(b))
			}
			return err
		})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("mount still failing 15s after the server came back: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestE2EDiskFull: a writer on a full export gets ENOSPC; the server keeps
// running and serves again once space is freed.
func TestE2EDiskFull(t *testing.T) {
	needFUSE(t)
	export := newExport(t)
	if err := syscall.Mount("tmpfs", export, "tmpfs", 0, "size=4m,mode=0755"); err != nil {
		t.Skipf("cannot mount a small tmpfs for the export: %v", err)
	}
	t.Cleanup(func() { // runs after the server and mount cleanups
		if err := syscall.Unmount(export, 0); err != nil {
			syscall.Unmount(export, syscall.MNT_DETACH)
		}
	})
	srv := startServer(t, export)
	m := startMount(t, srv.addr)

	chunk := patterned(1<<20, 70)
	var werr error
	err := within(t, 30*time.Second, "write 8 MiB to a 4 MiB export", func() error {
		f, err := os.Create(m.path("big"))
		if err != nil {
			return err
		}
		for i := 0; i < 8 && werr == nil; i++ {
			_, werr = f.Write(chunk)
		}
		if werr == nil {
			werr = f.Sync()
		}
		cerr := f.Close()
		if werr == nil {
			werr = cerr
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(werr, syscall.ENOSPC) {
		t.Fatalf("writing 8 MiB to a 4 MiB export: %v, want ENOSPC", werr)
	}
	if srv.exited() {
		t.Fatalf("server exited on a full disk; stderr:\n%s", srv.stderr.String())
	}
	if err := os.Remove(m.path("big")); err != nil {
		t.Fatalf("remove the partial file: %v", err)
	}
	mustWrite(t, m.path("small"), []byte("fits"))
	wantFile(t, "small file after freeing space", m.path("small"), []byte("fits"))
}

// TestE2EUnmount: SIGINT unmounts and exits 0; fusermount3 -u from outside
// makes the mount process exit; SIGTERM on a busy mount still ends it.
func TestE2EUnmount(t *testing.T) {
	needFUSE(t)
	srv := startServer(t, newExport(t))
	t.Run("SIGINT", func(t *testing.T) {
		m := startMount(t, srv.addr)
		mustWrite(t, m.path("x"), []byte("x"))
		m.signal(syscall.SIGINT)
		if code := m.mustExit(t, 10*time.Second); code != 0 {
			t.Errorf("exit code %d after SIGINT, want 0; stderr:\n%s", code, m.stderr.String())
		}
		if e2eIsMounted(m.dir) {
			t.Errorf("%s still mounted after SIGINT", m.dir)
		}
	})
	t.Run("FusermountFromOutside", func(t *testing.T) {
		m := startMount(t, srv.addr)
		// The mount point shows up at mount(2), before go-fuse has
		// finished its start-up; an unmount then fails the mount
		// itself. Wait for the mount's own line.
		m.waitStderr(t, "write_policy=", 10*time.Second)
		// Right after mounting, go-fuse's poll probe file may still be
		// being released, and the kernel answers EBUSY; a user retries.
		for i := 0; ; i++ {
			out, err := exec.Command("fusermount3", "-u", m.dir).CombinedOutput()
			if err == nil {
				break
			}
			if i == 20 || !strings.Contains(string(out), "busy") {
				t.Fatalf("fusermount3 -u %s: %v\n%s", m.dir, err, out)
			}
			time.Sleep(100 * time.Millisecond)
		}
		code := m.mustExit(t, 10*time.Second)
		if code != 0 {
			t.Errorf("exit code %d after fusermount3 -u, want 0; stderr:\n%s", code, m.stderr.String())
		}
		if e2eIsMounted(m.dir) {
			t.Errorf("%s still mounted", m.dir)
		}
	})
	t.Run("SIGTERMBusy", func(t *testing.T) {
		m := startMount(t, srv.addr)
		f, err := os.Create(m.path("held"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		m.signal(syscall.SIGTERM)
		m.mustExit(t, 20*time.Second)
		if e2eIsMounted(m.dir) {
			t.Errorf("%s still mounted after SIGTERM with a file open", m.dir)
		}
		// The held descriptor fails rather than hangs.
		within(t, 10*time.Second, "write to a file of an unmounted mount", func() error {
			_, err := f.Write([]byte("late"))
			return err
		})
	})
}
