package meta

import (
	"context"
	"fmt"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/coopfs/coopfs/internal/bench/cluster"
)

// loopbackCommand is the hidden mode of `coopfs bench meta` that serves
// the loopback passthrough: loopbackCommand EXPORT MOUNTPOINT.
const loopbackCommand = "loopback-serve"

// serveLoopback mounts go-fuse's loopback file system of export at mnt,
// with libfuse's (and so bindfs's) default timeouts, until ctx ends.
func serveLoopback(ctx context.Context, export, mnt string) error {
	if err := cluster.FUSEUnavailable(); err != nil {
		return fmt.Errorf("loopback passthrough: %w", err)
	}
	root, err := fs.NewLoopbackRoot(export)
	if err != nil {
		return fmt.Errorf("loopback of %s: %w", export, err)
	}
	sec := time.Second
	server, err := fs.Mount(mnt, root, &fs.Options{EntryTimeout: &sec, AttrTimeout: &sec,
		MountOptions: fuse.MountOptions{FsName: "loopback", Name: "loopback"}})
	if err != nil {
		return fmt.Errorf("mount the loopback passthrough at %s: %w", mnt, err)
	}
	go func() {
		<-ctx.Done()
		if server.Unmount() != nil {
			_ = cluster.LazyUnmount(mnt)
		}
	}()
	server.Wait()
	return nil
}
