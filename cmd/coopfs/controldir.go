package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// The control sockets' directory (control.go) is the user's own: a
// process that answers on it answers `coopfs flush` and `coopfs warmup`,
// so a directory someone else made first — /tmp/coopfs-UID is a name any
// local user can take — must not be used, neither to listen nor to dial.

// errControlDir is a control directory that is not the user's own.
var errControlDir = errors.New("not this user's own directory with mode 0700")

// controlDir is the directory of this user's control sockets:
// $XDG_RUNTIME_DIR/coopfs, else /run/coopfs for root, else
// /tmp/coopfs-UID (whose owner and mode are checked: checkControlDir).
func controlDir() string {
	if base := os.Getenv("XDG_RUNTIME_DIR"); base != "" {
		return filepath.Join(base, "coopfs")
	}
	if os.Geteuid() == 0 {
		return "/run/coopfs"
	}
	return filepath.Join(os.TempDir(), "coopfs-"+strconv.Itoa(os.Geteuid()))
}

// checkControlDir checks that dir is a directory (not a symlink) of this
// user's own with mode 0700.
func checkControlDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("control socket directory: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() || fi.Mode().Perm() != 0o700 {
		uid := -1
		if ok {
			uid = int(st.Uid)
		}
		return fmt.Errorf("control socket directory %s is %w (it is %v, owner uid %d): remove it, or set XDG_RUNTIME_DIR to a directory of your own", dir, errControlDir, fi.Mode(), uid)
	}
	return nil
}

// ensureControlDir makes dir (mode 0700) if it does not exist, then checks it.
func ensureControlDir(dir string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("control socket: %w", err)
	}
	return checkControlDir(dir)
}

// dialControlSocket dials the control socket path after checking its
// directory: a socket in a directory another user controls is not ours.
func dialControlSocket(ctx context.Context, path string) (net.Conn, error) {
	if err := checkControlDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	var d net.Dialer
	return d.DialContext(ctx, "unix", path)
}
