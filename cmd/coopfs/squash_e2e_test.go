package main

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
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
