package meta

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/coopfs/coopfs/internal/bench/cluster"
	"github.com/coopfs/coopfs/internal/bench/workload"
	"github.com/coopfs/coopfs/internal/obs"
)

// Target names, also the last part of the row keys.
const (
	TargetExt4   = "ext4"
	TargetPass   = "passthrough"
	TargetCoopfs = "coopfs"
)

// Roles of a target's processes (target.procs).
const (
	roleDaemon = "daemon" // the passthrough's FUSE daemon
	roleServer = "server" // coopfs serve
	roleMount  = "mount"  // coopfs mount
)

// target is one way of reaching the export.
type target interface {
	// name is TargetExt4, TargetPass or TargetCoopfs.
	name() string
	// root is the directory the workloads use (the export or a mount of it).
	root() string
	// cold empties every cache between the workload and the disk: sync,
	// drop the kernel's caches, remount (restart) what can be.
	cold(ctx context.Context) error
	// messages are the messages the target's client has sent so far, by
	// type (nil for targets without a client).
	messages(ctx context.Context) (map[string]float64, error)
	// procs are the target's processes by role (nil: none), whose CPU
	// time and context switches the round-trip probe reports per call.
	procs() map[string]int
	close() error
}

// dropCaches drops the kernel's caches, or says once why it cannot.
type dropper struct{ err error }

func (d *dropper) drop() {
	if d.err == nil {
		d.err = workload.DropCaches()
	} else {
		syscall.Sync()
	}
}

// ext4Target is the export directory itself.
type ext4Target struct {
	dir string
	d   *dropper
}

func (t *ext4Target) name() string { return TargetExt4 }
func (t *ext4Target) root() string { return t.dir }
func (t *ext4Target) cold(context.Context) error {
	t.d.drop()
	return nil
}
func (t *ext4Target) messages(context.Context) (map[string]float64, error) { return nil, nil }
func (t *ext4Target) procs() map[string]int                                { return nil }
func (t *ext4Target) close() error                                         { return nil }

// passTarget is a FUSE passthrough of the export in its own process:
// bindfs, or go-fuse's loopback file system (`coopfs bench meta
// loopback-serve`). Never in this process: a child forked by this process
// (a tool of a step) would deadlock with a FUSE server that shares its
// runtime (vfork holds a P, and a stop-the-world then waits for it).
type passTarget struct {
	kind   string // PassBindfs or PassLoopback
	binary string // coopfs, for PassLoopback
	export string
	mnt    string
	d      *dropper

	cmd  *exec.Cmd
	done chan error // cmd's Wait
}

func newPassTarget(ctx context.Context, kind, binary, export, mnt string, d *dropper) (*passTarget, error) {
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return nil, fmt.Errorf("passthrough mount point: %w", err)
	}
	t := &passTarget{kind: kind, binary: binary, export: export, mnt: mnt, d: d}
	if err := t.mount(ctx); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *passTarget) name() string { return TargetPass }
func (t *passTarget) root() string { return t.mnt }
func (t *passTarget) messages(context.Context) (map[string]float64, error) {
	return nil, nil
}

func (t *passTarget) procs() map[string]int {
	if t.cmd == nil {
		return nil
	}
	return map[string]int{roleDaemon: t.cmd.Process.Pid}
}

func (t *passTarget) mount(ctx context.Context) error {
	if t.kind == PassLoopback {
		t.cmd = exec.Command(t.binary, "bench", "meta", loopbackCommand, t.export, t.mnt)
	} else {
		t.cmd = exec.Command("bindfs", "-f", t.export, t.mnt)
	}
	var out strings.Builder
	t.cmd.Stdout, t.cmd.Stderr = &out, &out
	t.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := t.cmd.Start(); err != nil {
		return fmt.Errorf("start the %s passthrough: %w", t.kind, err)
	}
	t.done = make(chan error, 1)
	go func() { t.done <- t.cmd.Wait() }()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if m, _ := cluster.IsMounted(t.mnt); m {
			return nil
		}
		select {
		case err := <-t.done:
			t.cmd = nil
			return fmt.Errorf("the %s passthrough of %s at %s exited while mounting (%v): %s", t.kind, t.export, t.mnt, err, strings.TrimSpace(out.String()))
		case <-ctx.Done():
			t.unmount()
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.unmount()
			return fmt.Errorf("the %s passthrough did not mount %s within 15s: %s", t.kind, t.mnt, out.String())
		}
	}
}

// unmount unmounts and waits for the passthrough to stop.
func (t *passTarget) unmount() error {
	if t.cmd == nil {
		return nil
	}
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
	t.cmd = nil
	return err
}

func (t *passTarget) cold(ctx context.Context) error {
	if err := t.unmount(); err != nil {
		return err
	}
	t.d.drop()
	return t.mount(ctx)
}

func (t *passTarget) close() error { return t.unmount() }

// coopfsTarget is a coopfs server exporting the directory and Clients
// mounts, policy none.
type coopfsTarget struct {
	ccfg cluster.Config
	cl   *cluster.Cluster
	d    *dropper
}

func newCoopfsTarget(ctx context.Context, cfg *Config, export, dir string, clients int, d *dropper) (*coopfsTarget, error) {
	t := &coopfsTarget{d: d, ccfg: cluster.Config{Binary: cfg.Binary, Env: cfg.Env, Export: export, Clients: clients,
		Dir: dir, Keep: true, Logger: cfg.Logger, ServerArgs: []string{"--policy", "none", "--log-level", "warn"},
		MountArgs: append([]string{"--log-level", "warn"}, cfg.MountArgs...)}}
	if err := t.start(ctx); err != nil {
		return nil, err
	}
	return t, nil
}

func (t *coopfsTarget) start(ctx context.Context) error {
	cl, err := cluster.Start(ctx, t.ccfg)
	if err != nil {
		return fmt.Errorf("start coopfs: %w", err)
	}
	t.cl = cl
	return nil
}

func (t *coopfsTarget) name() string { return TargetCoopfs }
func (t *coopfsTarget) root() string { return t.cl.Mountpoints()[0] }

func (t *coopfsTarget) cold(ctx context.Context) error {
	if err := t.close(); err != nil {
		return err
	}
	t.d.drop()
	return t.start(ctx)
}

func (t *coopfsTarget) messages(ctx context.Context) (map[string]float64, error) {
	return clientMessages(ctx, t.cl.Clients[0].MetricsAddr)
}

func (t *coopfsTarget) procs() map[string]int {
	if t.cl == nil || t.cl.Server == nil || len(t.cl.Clients) == 0 {
		return nil
	}
	return map[string]int{roleServer: t.cl.Server.Pid, roleMount: t.cl.Clients[0].Pid}
}

func (t *coopfsTarget) close() error {
	if t.cl == nil {
		return nil
	}
	err := t.cl.Close()
	t.cl = nil
	return err
}

// clientMessages scrapes the messages a coopfs client sent, by type.
func clientMessages(ctx context.Context, addr string) (map[string]float64, error) {
	ss, err := obs.Fetch(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("counters of the coopfs mount: %w", err)
	}
	return ss.SumBy(obs.MetricMessages, "type", map[string]string{"dir": obs.DirOut}), nil
}

// subMessages is after - before, without zero entries.
func subMessages(after, before map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// pathOf joins a target root with a relative path.
func pathOf(t target, rel string) string { return filepath.Join(t.root(), rel) }
