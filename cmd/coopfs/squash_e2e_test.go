package main

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestE2ERootSquash serves with the default --squash root: root on the
// mount acts as nobody in the export, so it cannot write in root's
// directories or read root's private files, and what it creates in an open
// directory belongs to 65534. Another user keeps its identity.
func TestE2ERootSquash(t *testing.T) {
	needFUSE(t)
	export := t.TempDir()
	if err := os.Chmod(export, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(export, "secret"), []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	open := filepath.Join(export, "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	srv := startServerAt(t, e2eFreeAddr(t), export, "--squash", "root")
	m := startMount(t, srv.addr)

	if _, err := os.ReadFile(m.path("secret")); !errors.Is(err, syscall.EACCES) {
		t.Errorf("squashed root reads root's 0600 file: %v, want EACCES", err)
	}
	if err := os.WriteFile(m.path("new"), nil, 0o644); !errors.Is(err, syscall.EACCES) {
		t.Errorf("squashed root creates in root's 0755 export: %v, want EACCES", err)
	}
	if err := os.WriteFile(m.path("open/mine"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(open, "mine"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Uid != 65534 || st.Gid != 65534 {
		t.Errorf("file made by squashed root owned by %d:%d, want 65534:65534", st.Uid, st.Gid)
	}
	// chown to root is refused: nobody may not give files away.
	if err := os.Chown(m.path("open/mine"), 0, 0); !errors.Is(err, syscall.EPERM) {
		t.Errorf("squashed root chowns to root: %v, want EPERM", err)
	}
}

// TestE2EServeBadSquash: a wrong --squash or anonymous id is a one-line
// error and exit non-zero.
func TestE2EServeBadSquash(t *testing.T) {
	needBinary(t)
	addr := e2eFreeAddr(t)
	dir := t.TempDir()
	p, code := runCoopfs(t, 10*time.Second, nil, "serve", "--export", dir, "--listen", addr, "--squash", "some")
	wantOneLineError(t, p, code, "coopfs serve:", "--squash", "root, all or none")
	p, code = runCoopfs(t, 10*time.Second, nil, "serve", "--export", dir, "--listen", addr, "--anon-uid", "0")
	wantOneLineError(t, p, code, "coopfs serve:", "--anon-uid", "--squash none")
}

// TestE2EWriteClearsSetID: a user who may write to a root-owned set-id
// file (its group's member) writes to it through the mount of a server
// with --squash root: the write succeeds, and the file loses the bits ext4
// clears for that user. Through a mount the kernel's kill-priv chmod comes
// first (served on one descriptor opened as the user); a client that skips
// it is internal/server's TestAttackWriteKeepsSetuid.
func TestE2EWriteClearsSetID(t *testing.T) {
	needFUSE(t)
	const user = 1000
	export := t.TempDir()
	os.Chmod(export, 0o755)
	srv := startServerAt(t, e2eFreeAddr(t), export, "--squash", "root")
	m := startMount(t, srv.addr)
	for _, tc := range []struct{ mode, want uint32 }{{0o4775, 0o775}, {0o6775, 0o775}} {
		p := filepath.Join(export, "prog")
		os.WriteFile(p, []byte("#!/bin/sh\n"), 0o600)
		os.Chown(p, 0, user)
		syscall.Chmod(p, tc.mode)
		mnt, err := os.Open(m.path())
		if err != nil {
			t.Fatal(err)
		}
		werr := make(chan error, 1)
		go func() { // as the user: the FUSE request carries the thread's fsuid
			runtime.LockOSThread() // the thread ends with the goroutine
			unix.Setgroups(nil)
			unix.Setfsgid(user)
			unix.Setfsuid(user)
			fd, err := unix.Openat(int(mnt.Fd()), "prog", unix.O_WRONLY|unix.O_APPEND, 0)
			if err != nil {
				werr <- err
				return
			}
			_, err = unix.Write(fd, []byte("echo evil\n"))
			unix.Close(fd)
			werr <- err
		}()
		err = <-werr
		mnt.Close()
		if err != nil {
			t.Fatalf("write by uid %d to a root-owned %o file of its group: %v", user, tc.mode, err)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		if st.Mode&0o7777 != tc.want {
			t.Errorf("a %o file after a write by uid %d through the mount: %o, want %o", tc.mode, user, st.Mode&0o7777, tc.want)
		}
	}
}
