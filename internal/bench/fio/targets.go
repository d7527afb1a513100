package fio

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/coopfs/coopfs/internal/bench/cluster"
	"github.com/coopfs/coopfs/internal/bench/workload"
)

// target is one file system the jobs run on.
type target interface {
	name() string
	root() string // the directory the jobs use
	// cold empties every cache between the next read and the disk: the
	// machine's (drop_caches) and the file system's own (a restart).
	cold(ctx context.Context) error
	close() error
}

// ext4Target is the export's file system itself.
type ext4Target struct{ dir string }

func (t *ext4Target) name() string               { return TargetExt4 }
func (t *ext4Target) root() string               { return t.dir }
func (t *ext4Target) cold(context.Context) error { return workload.DropCaches() }
func (t *ext4Target) close() error               { return nil }

// passTarget is bindfs, the FUSE passthrough, in its own process.
type passTarget struct {
	src, mnt string
	st       *cluster.Starter // forks it from one locked thread (Pdeathsig)
	cmd      *exec.Cmd
	done     chan error
}

func newPassTarget(ctx context.Context, src, mnt string) (*passTarget, error) {
	if _, err := exec.LookPath("bindfs"); err != nil {
		return nil, fmt.Errorf("the passthrough target needs bindfs (apt-get install bindfs, or make deps): %w", err)
	}
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return nil, fmt.Errorf("bindfs mount point: %w", err)
	}
	t := &passTarget{src: src, mnt: mnt, st: cluster.NewStarter()}
	t.cmd = exec.Command("bindfs", "-f", src, mnt)
	var out strings.Builder
	t.cmd.Stdout, t.cmd.Stderr = &out, &out
	t.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := t.st.Start(t.cmd); err != nil {
		t.st.Close()
		return nil, fmt.Errorf("start bindfs: %w", err)
	}
	t.done = make(chan error, 1)
	go func() { t.done <- t.cmd.Wait() }()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if m, _ := cluster.IsMounted(mnt); m {
			return t, nil
		}
		select {
		case err := <-t.done:
			t.st.Close()
			return nil, fmt.Errorf("bindfs %s %s exited while mounting (%v): %s", src, mnt, err, strings.TrimSpace(out.String()))
		case <-ctx.Done():
			t.close()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.close()
			return nil, fmt.Errorf("bindfs did not mount %s within 15s: %s", mnt, out.String())
		}
	}
}

func (t *passTarget) name() string { return TargetPass }
func (t *passTarget) root() string { return t.mnt }

// cold drops the machine's caches, the FUSE mount's page cache, dentries
// and inodes with them; bindfs keeps no cache of its own.
func (t *passTarget) cold(context.Context) error { return workload.DropCaches() }

func (t *passTarget) close() error {
	defer t.st.Close()
	var err error
	if m, _ := cluster.IsMounted(t.mnt); m {
		if err = syscall.Unmount(t.mnt, 0); err != nil {
			err = cluster.LazyUnmount(t.mnt)
		}
	}
	select {
	case <-t.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-t.cmd.Process.Pid, syscall.SIGKILL)
		<-t.done
	}
	return err
}

// coopTarget is a coopfs server and one mount, started the way bench local
// starts them (TLS with a fresh secret over loopback).
type coopTarget struct {
	tname string
	sub   string // the directory of the export the jobs use
	ccfg  cluster.Config
	cl    *cluster.Cluster
	runs  int
}

func newCoopTarget(ctx context.Context, name, sub string, ccfg cluster.Config) (*coopTarget, error) {
	t := &coopTarget{tname: name, sub: sub, ccfg: ccfg}
	if err := t.start(ctx); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *coopTarget) start(ctx context.Context) error {
	cfg := t.ccfg
	t.runs++
	cfg.Dir = filepath.Join(t.ccfg.Dir, strconv.Itoa(t.runs))
	cl, err := cluster.Start(ctx, cfg)
	if err != nil {
		return fmt.Errorf("start coopfs (%s): %w", t.tname, err)
	}
	t.cl = cl
	return nil
}

func (t *coopTarget) name() string { return t.tname }
func (t *coopTarget) root() string { return filepath.Join(t.cl.Mountpoints()[0], t.sub) }

// cold restarts the server and the mount (their memory caches start
// empty; a disk cache is kept, as on a real restart) with the machine's
// caches dropped in between.
func (t *coopTarget) cold(ctx context.Context) error {
	if err := t.close(); err != nil {
		return err
	}
	if err := workload.DropCaches(); err != nil {
		return err
	}
	return t.start(ctx)
}

func (t *coopTarget) close() error {
	if t.cl == nil {
		return nil
	}
	err := t.cl.Close()
	t.cl = nil
	if err == nil {
		_ = os.RemoveAll(filepath.Join(t.ccfg.Dir, strconv.Itoa(t.runs)))
	}
	return err
}
