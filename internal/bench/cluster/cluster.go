package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/coopfs/coopfs/internal/obs"
)

// Defaults of Config.
const (
	DefaultStartTimeout = 30 * time.Second
	DefaultStopTimeout  = 10 * time.Second
)

// Config says what to start. The zero value of every field but Export is
// usable.
type Config struct {
	// Binary is the coopfs executable; "" means os.Executable() (the
	// running coopfs).
	Binary string
	// Env is added to the children's environment.
	Env []string
	// Export is the directory the server exports (required).
	Export string
	// Clients is the number of FUSE mounts (0: the server only).
	Clients int
	// Dir holds the logs and mount points; "" means a new temporary
	// directory, removed by Close unless Keep is set.
	Dir string
	// Keep leaves the run directory (logs) in place after Close; the
	// mount points are removed in any case.
	Keep bool
	// ServerArgs and MountArgs are extra flags for `coopfs serve` and each
	// `coopfs mount` (e.g. --cache-size 2GiB, later --policy directory).
	ServerArgs []string
	MountArgs  []string
	// Insecure runs every process with --insecure (plaintext) instead of
	// TLS with a fresh cluster secret (secret.go), for comparisons.
	Insecure bool
	// StartTimeout bounds the wait for each process to become ready;
	// StopTimeout how long a process may take to exit after SIGTERM.
	StartTimeout time.Duration
	StopTimeout  time.Duration
	// Logger receives the launcher's own progress (nil: discarded).
	Logger *slog.Logger
}

func (c *Config) setDefaults() error {
	if c.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("cluster: cannot find the coopfs binary: %w", err)
		}
		c.Binary = exe
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = DefaultStartTimeout
	}
	if c.StopTimeout <= 0 {
		c.StopTimeout = DefaultStopTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

func (c *Config) validate() error {
	switch {
	case c.Export == "":
		return errors.New("cluster: no export directory")
	case c.Clients < 0:
		return fmt.Errorf("cluster: %d clients", c.Clients)
	}
	st, err := os.Stat(c.Export)
	if err != nil {
		return fmt.Errorf("cluster: export: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("cluster: export %s is not a directory", c.Export)
	}
	return nil
}

// Role of a process in the cluster.
const (
	RoleServer = "server"
	RoleClient = "client"
	RoleOther  = "other" // started with Cluster.StartProc
)

// Cluster is a running local cluster. Its methods are safe for concurrent
// use.
type Cluster struct {
	cfg    Config
	dir    string // run directory
	ownDir bool   // dir was created by Start
	log    *slog.Logger

	// Addr is the server's HOST:PORT.
	Addr string
	// Secret is the cluster secret the processes were given (nil with
	// Insecure or caller-chosen credentials), for in-process clients.
	Secret []byte
	// Server is the `coopfs serve` process; Clients the mounts, in order.
	Server  *Proc
	Clients []*Proc

	starter *Starter // every child is started from its thread (starter.go)

	mu     sync.Mutex
	procs  []*Proc // every process launched, in order
	closed bool

	closeOnce sync.Once
	closeErr  error
	stopWatch func() bool
}

// Start launches the server and cfg.Clients mounts and waits until all are
// ready. On failure everything started is torn down and the error carries
// the tail of the failing process's log. Ending ctx tears the cluster down.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, log: cfg.Logger}
	if cfg.Dir == "" {
		d, err := os.MkdirTemp("", "coopfs-cluster-")
		if err != nil {
			return nil, fmt.Errorf("cluster: run directory: %w", err)
		}
		c.dir, c.ownDir = d, true
	} else {
		if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
			return nil, fmt.Errorf("cluster: run directory: %w", err)
		}
		c.dir = cfg.Dir
	}
	if d, err := filepath.EvalSymlinks(c.dir); err == nil {
		c.dir = d
	}
	c.starter = NewStarter()
	c.stopWatch = context.AfterFunc(ctx, func() { c.Close() })
	if err := c.start(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context) error {
	export, err := filepath.Abs(c.cfg.Export)
	if err != nil {
		return err
	}
	serveCreds, mountCreds, secret, err := c.credentials()
	if err != nil {
		return err
	}
	c.Secret = secret
	// A port picked from :0 may be taken again before the server binds it;
	// retry a few times on a bind failure.
	for attempt := 0; ; attempt++ {
		addr, err1 := freeAddr()
		maddr, err2 := freeAddr()
		if err := errors.Join(err1, err2); err != nil {
			return err
		}
		// The cluster's mounts are used by root on this one machine: trusted.
		args := append([]string{"serve", "--export", export, "--listen", addr, "--metrics", maddr, "--squash", "none"}, serveCreds...)
		args = append(args, c.cfg.ServerArgs...)
		p, err := c.launch(RoleServer, "server", args, maddr, "")
		if err == nil {
			err = c.waitReady(ctx, p, func() (bool, error) {
				_, err := obs.Fetch(ctx, maddr)
				return err == nil, nil
			})
		}
		if err == nil {
			c.Server, c.Addr = p, addr
			break
		}
		if p != nil {
			p.stop(c.cfg.StopTimeout)
		}
		if attempt >= 2 || ctx.Err() != nil {
			return err
		}
		c.log.Warn("server did not start, retrying with other ports", "err", err)
	}
	c.log.Info("server ready", "addr", c.Addr, "pid", c.Server.Pid)
	for i := range c.cfg.Clients {
		name := fmt.Sprintf("client%d", i+1)
		mnt := filepath.Join(c.dir, "mnt-"+name)
		if err := os.Mkdir(mnt, 0o755); err != nil {
			return fmt.Errorf("cluster: mount point: %w", err)
		}
		maddr, err := freeAddr()
		if err != nil {
			return err
		}
		args := append([]string{"mount", "--server", c.Addr, "--metrics", maddr, "--name", name}, mountCreds...)
		args = append(append(args, c.cfg.MountArgs...), mnt)
		p, err := c.launch(RoleClient, name, args, maddr, mnt)
		if err != nil {
			return err
		}
		c.Clients = append(c.Clients, p)
		if err := c.waitReady(ctx, p, func() (bool, error) { return IsMounted(mnt) }); err != nil {
			return err
		}
		c.log.Info("client mounted", "name", name, "mountpoint", mnt, "pid", p.Pid)
	}
	return nil
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("cluster: find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// StartProc starts another process of the coopfs binary (args after the
// binary), logging to the run directory and torn down with the cluster. If
// mountpoint is not empty, it waits until a file system is mounted there.
func (c *Cluster) StartProc(ctx context.Context, name string, args []string, mountpoint string) (*Proc, error) {
	p, err := c.launch(RoleOther, name, args, "", mountpoint)
	if err != nil {
		return nil, err
	}
	ready := func() (bool, error) { return true, nil }
	if mountpoint != "" {
		ready = func() (bool, error) { return IsMounted(mountpoint) }
	}
	if err := c.waitReady(ctx, p, ready); err != nil {
		return nil, err
	}
	return p, nil
}

// Dir is the run directory (logs, mount points).
func (c *Cluster) Dir() string { return c.dir }

// Mountpoints returns the clients' mount points, in order.
func (c *Cluster) Mountpoints() []string {
	var out []string
	for _, p := range c.Clients {
		out = append(out, p.Mountpoint)
	}
	return out
}

// launch starts the binary with args, its output going to <dir>/<name>.log.
func (c *Cluster) launch(role, name string, args []string, metrics, mountpoint string) (*Proc, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errors.New("cluster: closed")
	}
	logPath := filepath.Join(c.dir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cluster: log file: %w", err)
	}
	defer f.Close() // the child holds its own descriptor
	fmt.Fprintf(f, "## %s %s %v\n", time.Now().Format(time.RFC3339Nano), c.cfg.Binary, args)
	cmd := exec.Command(c.cfg.Binary, args...)
	cmd.Env = append(os.Environ(), c.cfg.Env...)
	cmd.Stdout, cmd.Stderr = f, f
	// Own process group: a Ctrl-C in the terminal reaches only us, and we
	// stop the children in order. SIGTERM if we die: mounts unmount.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := c.starter.Start(cmd); err != nil {
		return nil, fmt.Errorf("cluster: start %s: %w", name, err)
	}
	p := &Proc{Name: name, Role: role, Pid: cmd.Process.Pid, MetricsAddr: metrics, Log: logPath,
		Mountpoint: mountpoint, Args: args, cmd: cmd, done: make(chan struct{})}
	c.procs = append(c.procs, p)
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// waitReady polls ready until it reports true, the process exits, ctx ends
// or the start timeout passes; errors name the process and show its log.
func (c *Cluster) waitReady(ctx context.Context, p *Proc, ready func() (bool, error)) error {
	deadline := time.Now().Add(c.cfg.StartTimeout)
	for {
		ok, err := ready()
		if err != nil {
			return fmt.Errorf("cluster: %s: %w", p.Name, err)
		}
		if ok {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("cluster: %s exited while starting (%v); %s", p.Name, p.err, p.TailText(15))
		case <-ctx.Done():
			return fmt.Errorf("cluster: waiting for %s: %w", p.Name, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster: %s not ready after %v; %s", p.Name, c.cfg.StartTimeout, p.TailText(15))
		}
	}
}

// Close tears the cluster down: the mounts first (SIGTERM, then a lazy
// unmount and SIGKILL if they do not exit in time), then any other process,
// then the server; it removes the mount points and, unless Keep or Dir was
// given, the run directory. It never removes a directory that is still a
// mount point. Calling it again returns the first result.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.teardown() })
	return c.closeErr
}

func (c *Cluster) teardown() error {
	if c.stopWatch != nil {
		c.stopWatch()
	}
	// No launch can start after this: launch checks closed under mu.
	c.mu.Lock()
	c.closed = true
	procs := c.procs
	c.mu.Unlock()
	var mounters, servers []*Proc
	for _, p := range procs {
		if p.Role == RoleServer {
			servers = append(servers, p)
		} else {
			mounters = append(mounters, p)
		}
	}
	var errs []error
	var wg sync.WaitGroup
	var emu sync.Mutex
	stopAll := func(ps []*Proc) {
		for _, p := range ps {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := c.stopMount(p); err != nil {
					emu.Lock()
					errs = append(errs, err)
					emu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	stopAll(mounters)
	for _, p := range servers {
		p.stop(c.cfg.StopTimeout)
	}
	c.starter.Close()
	// Remove the mount points (only empty, unmounted directories).
	for _, p := range mounters {
		if p.Mountpoint == "" || !isUnder(p.Mountpoint, c.dir) {
			continue
		}
		if m, _ := IsMounted(p.Mountpoint); m {
			errs = append(errs, fmt.Errorf("cluster: %s is still mounted; left in place (fusermount3 -u %s)", p.Mountpoint, p.Mountpoint))
			continue
		}
		_ = os.Remove(p.Mountpoint)
	}
	if c.ownDir && !c.cfg.Keep {
		if live, _ := MountsUnder(c.dir); len(live) > 0 {
			errs = append(errs, fmt.Errorf("cluster: mounts left under %s: %v; not removing it", c.dir, live))
		} else if err := os.RemoveAll(c.dir); err != nil {
			errs = append(errs, fmt.Errorf("cluster: remove %s: %w", c.dir, err))
		}
	}
	c.log.Info("cluster stopped", "dir", c.dir)
	return errors.Join(errs...)
}

// stopMount stops a process that may hold a mount and makes sure the mount
// is gone.
func (c *Cluster) stopMount(p *Proc) error {
	exited := p.stop(c.cfg.StopTimeout)
	if p.Mountpoint == "" {
		return nil
	}
	if m, _ := IsMounted(p.Mountpoint); !m {
		return nil
	}
	// The process died or hung without unmounting: detach it lazily.
	c.log.Warn("mount left behind, unmounting lazily", "mountpoint", p.Mountpoint, "exited", exited)
	if err := LazyUnmount(p.Mountpoint); err != nil {
		return fmt.Errorf("cluster: unmount %s: %w", p.Mountpoint, err)
	}
	return nil
}

// isUnder reports whether path is inside dir.
func isUnder(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !filepath.IsAbs(rel) && len(rel) > 0 && rel[0] != '.'
}

// Proc is a child process of the cluster.
type Proc struct {
	Name        string   // "server", "client1", ...
	Role        string   // RoleServer, RoleClient or RoleOther
	Pid         int      // also its process group id
	MetricsAddr string   // HOST:PORT of its /metrics ("" if none)
	Mountpoint  string   // for mounts
	Log         string   // file holding its stdout and stderr
	Args        []string // after the binary

	cmd  *exec.Cmd
	done chan struct{}
	err  error // valid once done is closed
}

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// stop sends SIGTERM to the process, then SIGKILL to its group after grace,
// and waits for it. It reports whether the process exited on SIGTERM.
func (p *Proc) stop(grace time.Duration) bool {
	select {
	case <-p.done:
		return true
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		_ = syscall.Kill(-p.Pid, syscall.SIGKILL) // leftovers of its group, if any
		return true
	case <-time.After(grace):
	}
	_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
	<-p.done
	return false
}

// Alive reports whether the process is still running.
func (p *Proc) Alive() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// ExitErr is what Wait returned, once the process has exited.
func (p *Proc) ExitErr() error {
	<-p.done
	return p.err
}

// pidString is for logs.
func (p *Proc) pidString() string { return strconv.Itoa(p.Pid) }
