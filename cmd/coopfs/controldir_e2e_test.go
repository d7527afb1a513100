package main

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestE2EFlushRefusesForeignControlDir: without XDG_RUNTIME_DIR a user's
// control sockets live in /tmp/coopfs-UID, a name any local user can take
// first. Another user makes it and listens there in the mount's place:
// `coopfs flush` by the user used to talk to it and print its "done".
// Now it refuses the directory with one line, and so does a mount's
// listener (unit test below).
func TestE2EFlushRefusesForeignControlDir(t *testing.T) {
	needBinary(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root to act as two users")
	}
	const user, squatter = 1000, 1001
	t.Setenv("XDG_RUNTIME_DIR", "")
	dir := filepath.Join(os.TempDir(), "coopfs-"+strconv.Itoa(user))
	if _, err := os.Lstat(dir); err == nil {
		t.Skipf("%s exists already", dir)
	}
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o777)
	os.Chown(dir, squatter, squatter)
	mnt := filepath.Join(os.TempDir(), "coopfs-e2e-not-a-mount-"+strconv.Itoa(os.Getpid()))
	sock := controlSocketIn(dir, mnt)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	os.Chmod(sock, 0o777)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			bufio.NewReader(c).ReadString('\n')
			c.Write([]byte("done 7 700\n"))
			c.Close()
		}
	}()
	p, code := runCoopfs(t, 10*time.Second, &syscall.Credential{Uid: user, Gid: user}, "flush", mnt)
	if code == 0 {
		t.Fatalf("coopfs flush as uid %d talked to uid %d's socket and succeeded; stdout:\n%s", user, squatter, p.stdout.String())
	}
	wantOneLineError(t, p, code, "coopfs flush:", "not this user's own directory")
}

// A mount's control listener refuses a directory that is not the user's
// own with mode 0700, and makes one that is.
func TestControlDirChecked(t *testing.T) {
	base := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", base)
	if err := ensureControlDir(controlDir()); err != nil {
		t.Fatalf("a fresh control directory: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(base, "coopfs")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("control directory: %v %v, want mode 0700", fi.Mode(), err)
	}
	os.Chmod(controlDir(), 0o755)
	stop, err := listenControl(controlSocket("/some/mount"), func(net.Conn) {}, nil)
	if err == nil {
		stop()
		t.Fatal("listened in a control directory of mode 0755")
	}
	if !strings.Contains(err.Error(), "mode 0700") {
		t.Errorf("error %q does not say what is wrong", err)
	}
}
