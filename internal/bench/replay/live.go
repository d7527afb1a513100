package replay

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coopfs/coopfs/internal/bench/nscluster"
	"github.com/coopfs/coopfs/internal/bench/slowfs"
	"github.com/coopfs/coopfs/internal/bench/workload"
	"github.com/coopfs/coopfs/internal/sim"
)

// liveRun is what one policy's live replay measured.
type liveRun struct {
	before, after nscluster.Counters
	reads         int64         // reads timed (after the warm-up)
	readTime      time.Duration // their sum
	accesses      int64         // accesses counted (after the warm-up)
	bad           int64         // reads that returned the wrong block
	elapsed       time.Duration
}

// serverArgs are serve's flags for policy.
func (c *Config) serverArgs(policy string) []string {
	cache := c.ServerCache
	args := []string{"--policy", policy, "--block-size", strconv.FormatInt(c.BlockSize, 10)}
	if policy == "hints" {
		// The simulator's hints use the server's memory as the discard
		// cache only (seed 002's best use of it): the live server gets the
		// same memory as its discard cache and a block cache of one block.
		args = append(args, "--discard-cache-size", strconv.FormatInt(cache, 10))
		cache = c.BlockSize
	}
	return append(args, "--cache-size", strconv.FormatInt(cache, 10))
}

// runLive replays t on a fresh cluster under policy.
func runLive(ctx context.Context, cfg *Config, t *trace, policy, dir string) (*liveRun, error) {
	export := filepath.Join(dir, "export-"+policy)
	if err := os.MkdirAll(export, 0o755); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	defer os.RemoveAll(export)
	unmount, err := exportOn(ctx, cfg, t, export)
	if err != nil {
		return nil, err
	}
	defer unmount()
	cl, err := nscluster.Start(ctx, nscluster.Config{Binary: cfg.Binary, Clients: t.clients,
		ServerLink: cfg.ServerLink, ClientLink: cfg.ClientLink, Export: export, Dir: filepath.Join(dir, "run-"+policy),
		ServerArgs: cfg.serverArgs(policy),
		// No data with an open: every miss is a block request, as the
		// simulator has it (agent/openread.go).
		MountArgs: []string{"--cache-size", strconv.FormatInt(cfg.ClientCache, 10), "--read-ahead", "0", "--open-data-max", "0"},
		Logger:    cfg.Logger})
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	r := &player{cfg: cfg, cl: cl, t: t, buf: workload.AlignedBuf(int(cfg.BlockSize)),
		files: make([]map[uint64]*openFile, t.clients)}
	for i := range r.files {
		r.files[i] = map[uint64]*openFile{}
	}
	defer r.closeAll()
	res, err := r.play(ctx)
	if err != nil {
		return nil, err
	}
	return res, cl.Close()
}

// exportOn writes the trace's files into export; with cfg.DiskLatency they
// go into a backing directory beside it, mounted at export through slowfs.
// The returned function unmounts (and removes the backing directory).
func exportOn(ctx context.Context, cfg *Config, t *trace, export string) (func(), error) {
	if cfg.DiskLatency <= 0 {
		return func() {}, t.writeExport(export, cfg.BlockSize)
	}
	backing := export + ".disk"
	if err := os.MkdirAll(backing, 0o755); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	if err := t.writeExport(backing, cfg.BlockSize); err != nil {
		os.RemoveAll(backing)
		return nil, err
	}
	s, err := slowfs.Mount(ctx, slowfs.Config{Backing: backing, Mountpoint: export, Latency: cfg.DiskLatency, Logger: cfg.Logger})
	if err != nil {
		os.RemoveAll(backing)
		return nil, fmt.Errorf("replay: --disk-latency: %w", err)
	}
	return func() {
		if err := s.Unmount(); err != nil {
			cfg.Logger.Warn("slow export not unmounted", "dir", export, "err", err)
		}
		os.RemoveAll(backing)
	}, nil
}

// player replays a trace through the mounts of a cluster.
type player struct {
	cfg   *Config
	cl    *nscluster.Cluster
	t     *trace
	buf   []byte
	files []map[uint64]*openFile // per client
}

type openFile struct{ ro, rw *os.File }

func (p *player) play(ctx context.Context) (*liveRun, error) {
	res := &liveRun{}
	warm := 0
	if p.cfg.WarmUp > 0 && len(p.t.accesses) > p.cfg.WarmUp {
		warm = p.cfg.WarmUp
	}
	prog := newProgress(p.cfg.Progress, len(p.t.accesses))
	// The warm-up is played in trace order in any case.
	if err := p.playSeq(ctx, p.t.accesses[:warm], 0, nil, prog); err != nil {
		return nil, err
	}
	p.closeAll() // the counted part starts with every file closed
	var err error
	if res.before, err = p.cl.Scrape(ctx); err != nil {
		return nil, err
	}
	start := time.Now()
	counted := p.t.accesses[warm:]
	if p.cfg.Parallel {
		err = p.playParallel(ctx, counted, warm, res, prog)
	} else {
		err = p.playSeq(ctx, counted, warm, res, prog)
	}
	if err != nil {
		return nil, err
	}
	p.closeAll()
	prog.done(len(p.t.accesses))
	res.elapsed = time.Since(start)
	// Releases and discard notifications are asynchronous: let them land.
	time.Sleep(300 * time.Millisecond)
	res.after, err = p.cl.Scrape(ctx)
	return res, err
}

// playSeq plays accesses one at a time in order (the first is access
// number first+1 of the trace); res, if not nil, counts them.
func (p *player) playSeq(ctx context.Context, as []sim.Access, first int, res *liveRun, prog *progress) error {
	for i, a := range as {
		if i%256 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
			prog.set(first + i)
		}
		d, err := p.access(a, p.buf, res)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err() // the testbed went down with the context
			}
			return fmt.Errorf("replay: access %d (%s): %w", first+i+1, sim.FormatAccess(a), err)
		}
		res.count(a, d)
	}
	return nil
}

// playParallel plays each client's accesses in its own goroutine, in the
// order of the trace for that client, as fast as the cluster answers
// (closed-loop clients): the links and the server see the load of all
// clients at once.
func (p *player) playParallel(ctx context.Context, as []sim.Access, first int, res *liveRun, prog *progress) error {
	per := make([][]int, p.t.clients)
	for i, a := range as {
		per[a.Client] = append(per[a.Client], i)
	}
	var mu sync.Mutex
	var done atomic.Int64
	errs := make([]error, p.t.clients)
	var wg sync.WaitGroup
	for c, idx := range per {
		wg.Go(func() {
			buf := workload.AlignedBuf(int(p.cfg.BlockSize))
			mine := &liveRun{}
			for k, i := range idx {
				if k%64 == 0 {
					if errs[c] = ctx.Err(); errs[c] != nil {
						return
					}
					prog.set(first + int(done.Load()))
				}
				d, err := p.access(as[i], buf, mine)
				if err != nil && ctx.Err() != nil {
					errs[c] = ctx.Err() // the testbed went down with the context
					return
				}
				if err != nil {
					errs[c] = fmt.Errorf("replay: access %d (%s): %w", first+i+1, sim.FormatAccess(as[i]), err)
					return
				}
				mine.count(as[i], d)
				done.Add(1)
			}
			mu.Lock()
			res.add(mine)
			mu.Unlock()
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// count records one played access (nil: not counted).
func (r *liveRun) count(a sim.Access, d time.Duration) {
	if r == nil {
		return
	}
	r.accesses++
	if a.Op == sim.OpRead {
		r.reads++
		r.readTime += d
	}
}

func (r *liveRun) add(o *liveRun) {
	r.accesses += o.accesses
	r.reads += o.reads
	r.readTime += o.readTime
	r.bad += o.bad
}

func (p *player) path(client int, id uint64) string {
	return filepath.Join(p.cl.Mounts[client].Dir, fileName(id))
}

// access plays one access and returns a read's duration.
// Each client's files are touched only by that client's goroutine.
func (p *player) access(a sim.Access, buf []byte, res *liveRun) (time.Duration, error) {
	switch a.Op {
	case sim.OpOpen:
		_, err := p.open(a.Client, a.File, false)
		return 0, err
	case sim.OpRead:
		f, err := p.open(a.Client, a.File, false)
		if err != nil {
			return 0, err
		}
		t0 := time.Now()
		n, err := f.ReadAt(buf, int64(a.Block)*p.cfg.BlockSize)
		d := time.Since(t0)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if n > 0 && !checkBlock(buf[:n], a.File, a.Block) && res != nil {
			res.bad++
		}
		return d, nil
	case sim.OpWrite:
		f, err := p.open(a.Client, a.File, true)
		if err != nil {
			return 0, err
		}
		fillBlock(buf, a.File, a.Block)
		_, err = f.WriteAt(buf, int64(a.Block)*p.cfg.BlockSize)
		return 0, err
	case sim.OpClose:
		return 0, p.close(a.Client, a.File)
	case sim.OpDelete:
		if err := p.close(a.Client, a.File); err != nil {
			return 0, err
		}
		err := os.Remove(p.path(a.Client, a.File))
		if errors.Is(err, os.ErrNotExist) {
			err = nil
		}
		return 0, err
	}
	return 0, nil
}

// open returns client's handle on file (read-only, or read-write for
// writes), opening it if needed; a file the trace deleted is created again.
func (p *player) open(client int, id uint64, write bool) (*os.File, error) {
	of := p.files[client][id]
	if of == nil {
		of = &openFile{}
		p.files[client][id] = of
	}
	h := &of.ro
	flags := os.O_RDONLY
	if write {
		h, flags = &of.rw, os.O_RDWR
	}
	if *h != nil {
		return *h, nil
	}
	f, err := os.OpenFile(p.path(client, id), flags|os.O_CREATE|syscall.O_DIRECT, 0o644)
	if err != nil {
		return nil, err
	}
	*h = f
	return f, nil
}

func (p *player) close(client int, id uint64) error {
	of := p.files[client][id]
	if of == nil {
		return nil
	}
	delete(p.files[client], id)
	var errs []error
	for _, f := range []*os.File{of.ro, of.rw} {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	return errors.Join(errs...)
}

func (p *player) closeAll() {
	for c, m := range p.files {
		for id := range m {
			_ = p.close(c, id)
		}
	}
}

// progress prints "label: i of n accesses" at most once a second.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	n     int
	start time.Time
	last  time.Time
}

func newProgress(w io.Writer, n int) *progress {
	now := time.Now()
	return &progress{w: w, n: n, start: now, last: now}
}

func (p *progress) set(i int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.last) < time.Second {
		return
	}
	p.last = time.Now()
	rate := float64(i) / time.Since(p.start).Seconds()
	fmt.Fprintf(p.w, "  live: %d of %d accesses (%.0f/s)\n", i, p.n, rate)
}

func (p *progress) done(n int) {
	fmt.Fprintf(p.w, "  live: %d accesses in %.1fs\n", n, time.Since(p.start).Seconds())
}
