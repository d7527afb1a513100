package wholefile

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/coopfs/coopfs/internal/bench/nscluster"
	"github.com/coopfs/coopfs/internal/obs"
)

// errSkip: the policy cannot run here (the server does not know it).
var errSkip = errors.New("policy not available")

// bench is one run: the configuration and the report being filled.
type bench struct {
	cfg Config
	rep *Report
	dir string // scratch directory of the exports
}

// Run runs the experiments cfg selects for each policy and returns the
// report. It needs root (the testbed).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := nscluster.Unavailable(); err != nil {
		return nil, fmt.Errorf("the namespace testbed cannot run here: %w", err)
	}
	dir, err := os.MkdirTemp("", "coopfs-bench-wholefile-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	b := &bench{cfg: cfg, dir: dir, rep: newReport(cfg)}
	steps := []struct {
		name string
		run  func(context.Context) error
	}{{"stagger", b.stagger}, {"web", b.web}, {"overload", b.overload}, {"overhead", b.overhead}, {"warmup", b.warmup}}
	for _, s := range steps {
		if !cfg.runs(s.name) {
			continue
		}
		if err := s.run(ctx); err != nil {
			return b.rep, fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return b.rep, nil
}

func (b *bench) progress(format string, args ...any) {
	fmt.Fprintf(b.cfg.Progress, "bench wholefile: "+format+"\n", args...)
}

// export makes a fresh export directory named name.
func (b *bench) export(name string) (string, error) {
	d := filepath.Join(b.dir, name)
	os.RemoveAll(d)
	return d, os.MkdirAll(d, 0o755)
}

// start runs a cluster of n clients on export under policy, each mount
// with the extra flags mount (before Config.MountArgs); errSkip when the
// server does not know the policy.
func (b *bench) start(ctx context.Context, policy string, n int, export string, mount ...string) (*nscluster.Cluster, error) {
	cl, err := nscluster.Start(ctx, nscluster.Config{Binary: b.cfg.Binary, Clients: n, ServerLink: b.cfg.ServerLink,
		ClientLink: b.cfg.ClientLink, Export: export, Keep: b.cfg.Keep, ServerArgs: append([]string{"--policy", policy}, b.cfg.ServeArgs...),
		MountArgs: append(slices.Clone(mount), b.cfg.MountArgs...), Logger: b.cfg.Logger})
	if errors.Is(err, nscluster.ErrServerStart) && strings.Contains(err.Error(), "policy") {
		b.rep.skip(policy, err)
		return nil, errSkip
	}
	return cl, err
}

// cacheFor is the memory cache (a --cache-size value) of a mount that must
// hold bytes of data: the default 512 MiB, or the data and a quarter more.
func cacheFor(bytes int64) string {
	return fmt.Sprintf("%dMiB", max(512, (bytes+bytes/4+(1<<20)-1)>>20))
}

// each runs f on a fresh cluster for every policy, skipping the ones the
// server does not know; mount are extra flags of every mount.
func (b *bench) each(ctx context.Context, exp string, n int, export string, mount []string, f func(ctx context.Context, policy string, cl *nscluster.Cluster) error) error {
	for _, p := range b.cfg.Policies {
		if b.rep.skipped(p) {
			continue
		}
		b.progress("%s: policy %s, %d clients", exp, p, n)
		cl, err := b.start(ctx, p, n, export, mount...)
		if errors.Is(err, errSkip) {
			b.progress("%s: policy %s skipped: the server does not know it", exp, p)
			continue
		}
		if err != nil {
			return err
		}
		err = f(ctx, p, cl)
		if cerr := cl.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("policy %s: %w", p, err)
		}
	}
	return nil
}

// serverBytes is what the server has sent from its own layers so far.
func serverBytes(ctx context.Context, cl *nscluster.Cluster) (float64, error) {
	c, err := cl.Scrape(ctx)
	if err != nil {
		return 0, err
	}
	return c.Server.Sum(obs.MetricReadBytes, map[string]string{"layer": obs.LayerServerMemory}) +
		c.Server.Sum(obs.MetricReadBytes, map[string]string{"layer": obs.LayerServerDisk}), nil
}

// writeFile writes size pseudo-random bytes to path.
func writeFile(path string, size int64, seed uint64) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), byte(seed >> 24)})
	if _, err := io.CopyN(f, r, size); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// readFile reads path to its end and returns the bytes read.
func readFile(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	return io.CopyBuffer(io.Discard, struct{ io.Reader }{f}, buf)
}

// timed runs f and returns its duration in seconds.
func timed(f func() error) (float64, error) {
	t := time.Now()
	err := f()
	return time.Since(t).Seconds(), err
}

// warmCmd runs `coopfs warmup args...` from the driver.
func (b *bench) warmCmd(ctx context.Context, args ...string) error {
	bin := b.cfg.Binary
	if bin == "" {
		var err error
		if bin, err = os.Executable(); err != nil {
			return err
		}
	}
	out, err := exec.CommandContext(ctx, bin, append([]string{"warmup", "--quiet"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("coopfs warmup %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
