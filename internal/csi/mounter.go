package csi

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/coopfs/coopfs/internal/fusefs"
)

// HelperMounter mounts by running the coopfs binary as its mount helper
// (argv[0] mount.fuse.coopfs): the same path as `mount -t fuse.coopfs`.
type HelperMounter struct {
	Bin string // the coopfs binary
}

// Mount implements Mounter.
func (m HelperMounter) Mount(ctx context.Context, server, target string, opts []string) error {
	cmd := exec.CommandContext(ctx, m.Bin, server, target, "-o", strings.Join(opts, ","))
	cmd.Args[0] = "mount.fuse.coopfs"
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if msg := strings.TrimSpace(out.String()); msg != "" {
			return fmt.Errorf("%s", strings.TrimPrefix(msg, "mount.fuse.coopfs: "))
		}
		return err
	}
	return nil
}

// Unmount implements Mounter.
func (HelperMounter) Unmount(target string) error {
	if err := unix.Unmount(target, 0); err != nil {
		return fmt.Errorf("umount %s: %w", target, err)
	}
	return nil
}

// IsMounted implements Mounter: the top mount at target is coopfs's.
func (HelperMounter) IsMounted(target string) (bool, error) {
	ms, err := fusefs.Mounts()
	if err != nil {
		return false, err
	}
	fstype := ""
	for _, e := range ms {
		if e.Dir == target {
			fstype = e.FSType
		}
	}
	return fstype == "fuse."+fusefs.DefaultFsName, nil
}
