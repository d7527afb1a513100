// Package fusefs is the FUSE frontend of a coopfs client: it mounts a
// go-fuse (github.com/hanwen/go-fuse/v2/fs) node tree whose every operation
// is translated into one call of a Backend (the agent), and every error into
// an errno by exactly one function, ToErrno.
//
// The adapter holds no file data and no policy. Node paths are relative to
// the export root; inode numbers come from wire.Attr.Ino, so hard links of
// one file are one inode. Permissions are checked by the kernel
// (default_permissions), as for a local file system. Answers a backend's
// server callback covers are cached by the kernel for long and invalidated
// (FUSE notify) when the callback breaks (callbacks.go).
//
// Mount validates the mount point, mounts with the options built by
// MountOptions (shared with the do-nothing benchmark file system in
// internal/bench/nullfs so that the two compare fairly), raises the mount's
// read-ahead through sysfs, and unmounts when its context is cancelled.
//
// A foreground mount that exits on SIGINT/SIGTERM and on an outside
// fusermount3 -u:
//
//	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
//	defer stop()
//	m, err := fusefs.Mount(ctx, dir, agent, fusefs.Config{AttrTimeout: attrTimeout}, log)
//	if err != nil {
//		return err // one line: missing, not a directory, already mounted, no FUSE
//	}
//	m.Wait() // returns after ctx is cancelled (Mount unmounts) or an outside unmount
package fusefs
