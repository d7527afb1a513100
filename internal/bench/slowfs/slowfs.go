package slowfs

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/coopfs/coopfs/internal/fusefs"
)

// Config configures a mount.
type Config struct {
	Backing    string        // the directory whose files the mount shows (required)
	Mountpoint string        // where to mount it (required, an existing directory)
	Latency    time.Duration // the cost of every read (>= 0)
	Logger     *slog.Logger
}

func (c *Config) validate() error {
	switch {
	case c.Backing == "":
		return fmt.Errorf("slowfs: no backing directory")
	case c.Mountpoint == "":
		return fmt.Errorf("slowfs: no mountpoint")
	case c.Latency < 0:
		return fmt.Errorf("slowfs: negative latency %v", c.Latency)
	}
	return nil
}

// FS is a mounted slow file system.
type FS struct {
	m     *fusefs.Mounted
	lat   time.Duration
	disk  sync.Mutex // one read at a time, as one disk arm
	reads atomic.Int64
}

// Mount mounts cfg.Backing at cfg.Mountpoint; Unmount undoes it.
func Mount(ctx context.Context, cfg Config) (*FS, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var st syscall.Stat_t
	if err := syscall.Stat(cfg.Backing, &st); err != nil {
		return nil, fmt.Errorf("slowfs: backing directory: %w", err)
	}
	s := &FS{lat: cfg.Latency}
	root := &fs.LoopbackRoot{Path: cfg.Backing, Dev: uint64(st.Dev)}
	root.NewNode = func(r *fs.LoopbackRoot, _ *fs.Inode, _ string, _ *syscall.Stat_t) fs.InodeEmbedder {
		return &node{LoopbackNode: fs.LoopbackNode{RootData: r}, s: s}
	}
	root.RootNode = root.NewNode(root, nil, "", &st)
	// No attribute caching: the server's fstat after a write must see it.
	m, err := fusefs.MountNode(ctx, cfg.Mountpoint, root.RootNode,
		fusefs.Config{FsName: "slowfs", AttrTimeout: -1, ReadAhead: -1}, cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("slowfs: mount %s: %w", cfg.Mountpoint, err)
	}
	s.m = m
	return s, nil
}

// Reads is the number of reads served (each cost Latency).
func (s *FS) Reads() int64 { return s.reads.Load() }

// Unmount unmounts the file system.
func (s *FS) Unmount() error { return s.m.Unmount() }

// read waits for the disk, then reads.
func (s *FS) read(f *fs.LoopbackFile, ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	s.disk.Lock()
	defer s.disk.Unlock()
	s.reads.Add(1)
	time.Sleep(s.lat)
	buf := make([]byte, len(dest)) // the result must not alias dest after the lock is released
	r, errno := f.Read(ctx, buf, off)
	if errno != 0 {
		return nil, errno
	}
	data, status := r.Bytes(buf)
	if !status.Ok() {
		return nil, syscall.EIO
	}
	return fuse.ReadResultData(data), 0
}

// node is a loopback node whose files are opened for direct I/O and read
// slowly.
type node struct {
	fs.LoopbackNode
	s *FS
}

var (
	_ fs.NodeOpener  = (*node)(nil)
	_ fs.NodeCreater = (*node)(nil)
)

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	fh, fl, errno := n.LoopbackNode.Open(ctx, flags)
	if errno != 0 {
		return nil, 0, errno
	}
	return n.wrap(fh), fl | fuse.FOPEN_DIRECT_IO, 0
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	in, fh, fl, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	return in, n.wrap(fh), fl | fuse.FOPEN_DIRECT_IO, 0
}

func (n *node) wrap(fh fs.FileHandle) fs.FileHandle {
	if lf, ok := fh.(*fs.LoopbackFile); ok {
		return &file{LoopbackFile: lf, s: n.s}
	}
	return fh
}

// file is a loopback file whose reads cost the latency.
type file struct {
	*fs.LoopbackFile
	s *FS
}

var _ fs.FileReader = (*file)(nil)

func (f *file) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return f.s.read(f.LoopbackFile, ctx, dest, off)
}
