package wholefile

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/coopfs/coopfs/internal/bench/nscluster"
)

// stagger: the clients read one file in turn; server bytes per client.
func (b *bench) stagger(ctx context.Context) error {
	exp, err := b.export("stagger")
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(exp, "big"), b.cfg.StaggerSize, 1); err != nil {
		return err
	}
	defer os.RemoveAll(exp)
	return b.each(ctx, "stagger", b.cfg.StaggerClients, exp, nil, func(ctx context.Context, p string, cl *nscluster.Cluster) error {
		row := PerClient{Policy: p}
		for _, m := range cl.Mounts {
			before, err := serverBytes(ctx, cl)
			if err != nil {
				return err
			}
			secs, err := timed(func() error { _, err := readFile(filepath.Join(m.Dir, "big")); return err })
			if err != nil {
				return err
			}
			after, err := serverBytes(ctx, cl)
			if err != nil {
				return err
			}
			row.ServerBytes = append(row.ServerBytes, after-before)
			row.Seconds = append(row.Seconds, secs)
		}
		b.rep.Stagger = append(b.rep.Stagger, row)
		return nil
	})
}

// webFiles returns the sizes of the web server's files: exponential around
// the mean, at least 512 bytes.
func webFiles(n int, mean int64, seed int64) []int64 {
	r := rand.New(rand.NewPCG(uint64(seed), 7))
	sizes := make([]int64, n)
	for i := range sizes {
		sizes[i] = max(512, int64(r.ExpFloat64()*float64(mean)))
	}
	return sizes
}

// zipf draws file indexes with probability ∝ 1/(rank+1).
type zipf struct {
	cdf []float64
	r   *rand.Rand
}

func newZipf(n int, seed uint64) *zipf {
	z := &zipf{cdf: make([]float64, n), r: rand.New(rand.NewPCG(seed, 11))}
	var sum float64
	for i := range z.cdf {
		sum += 1 / float64(i+1)
		z.cdf[i] = sum
	}
	for i := range z.cdf {
		z.cdf[i] /= sum
	}
	return z
}

func (z *zipf) next() int {
	return min(sort.SearchFloat64s(z.cdf, z.r.Float64()), len(z.cdf)-1)
}

// webLogEvery and webLogBytes: a log append after every 10 reads.
const (
	webLogEvery = 10
	webLogBytes = 16 << 10
)

// web: the web-server workload, clients in turn.
func (b *bench) web(ctx context.Context) error {
	exp, err := b.export("web")
	if err != nil {
		return err
	}
	defer os.RemoveAll(exp)
	sizes := webFiles(b.cfg.WebFiles, b.cfg.WebMean, b.cfg.Seed)
	for i, s := range sizes {
		if err := writeFile(filepath.Join(exp, "www", fmt.Sprintf("%02d", i%100), fmt.Sprintf("f%05d", i)), s, uint64(i)); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Join(exp, "log"), 0o777); err != nil {
		return err
	}
	return b.each(ctx, "web", b.cfg.WebClients, exp, nil, func(ctx context.Context, p string, cl *nscluster.Cluster) error {
		row := PerClient{Policy: p}
		for i, m := range cl.Mounts {
			// Every client plays the same request stream (the seed's web
			// server: one site's workload on each machine in turn).
			z := newZipf(b.cfg.WebFiles, uint64(b.cfg.Seed))
			before, err := serverBytes(ctx, cl)
			if err != nil {
				return err
			}
			secs, err := timed(func() error { return webClient(ctx, m.Dir, i, z, b.cfg.WebReads) })
			if err != nil {
				return err
			}
			after, err := serverBytes(ctx, cl)
			if err != nil {
				return err
			}
			row.ServerBytes = append(row.ServerBytes, after-before)
			row.Seconds = append(row.Seconds, secs)
		}
		b.rep.Web = append(b.rep.Web, row)
		return nil
	})
}

// webClient plays one client's reads, appending to its log every 10.
func webClient(ctx context.Context, dir string, client int, z *zipf, reads int) error {
	entry := make([]byte, webLogBytes)
	for n := 1; n <= reads; n++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		i := z.next()
		if _, err := readFile(filepath.Join(dir, "www", fmt.Sprintf("%02d", i%100), fmt.Sprintf("f%05d", i))); err != nil {
			return err
		}
		if n%webLogEvery != 0 {
			continue
		}
		f, err := os.OpenFile(filepath.Join(dir, "log", fmt.Sprintf("client%d.log", client+1)), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return err
		}
		_, err = f.Write(entry)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// overload is seed 001's overloaded server: clients 1 and 2 (the first
// pair) read files a and b at once, sharing the server's link; once
// OverloadStart of their bytes crossed it, clients 3 and 4 (the second
// pair) read a and b too. Every mount's memory cache holds a file.
func (b *bench) overload(ctx context.Context) error {
	exp, err := b.export("overload")
	if err != nil {
		return err
	}
	defer os.RemoveAll(exp)
	for i, name := range []string{"a", "b"} {
		if err := writeFile(filepath.Join(exp, name), b.cfg.OverloadSize, uint64(100+i)); err != nil {
			return err
		}
	}
	mount := []string{"--cache-size", cacheFor(b.cfg.OverloadSize)}
	return b.each(ctx, "overload", 4, exp, mount, func(ctx context.Context, p string, cl *nscluster.Cluster) error {
		row, err := b.overloadRun(ctx, p, cl)
		if err != nil {
			return err
		}
		b.progress("overload: %s: first pair %.1f s, second pair %.1f s (started at %.1f s)", p, row.FirstPair, row.SecondPair, row.Start)
		b.rep.Overload = append(b.rep.Overload, row)
		return nil
	})
}

// timedRead is one client's read of a file, timed from its start.
type timedRead struct {
	secs float64
	err  error
}

func startRead(path string) <-chan timedRead {
	ch := make(chan timedRead, 1)
	go func() {
		secs, err := timed(func() error { _, err := readFile(path); return err })
		ch <- timedRead{secs, err}
	}()
	return ch
}

// overloadRun is one policy's run of overload.
func (b *bench) overloadRun(ctx context.Context, p string, cl *nscluster.Cluster) (OverloadRow, error) {
	row := OverloadRow{Policy: p}
	t0 := time.Now()
	reads := []<-chan timedRead{startRead(filepath.Join(cl.Mounts[0].Dir, "a")), startRead(filepath.Join(cl.Mounts[1].Dir, "b"))}
	threshold := b.cfg.OverloadStart * 2 * float64(b.cfg.OverloadSize)
	for {
		sb, err := serverBytes(ctx, cl)
		if err != nil {
			return row, err
		}
		if sb >= threshold {
			break
		}
		select {
		case <-ctx.Done():
			return row, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	row.Start = time.Since(t0).Seconds()
	reads = append(reads, startRead(filepath.Join(cl.Mounts[2].Dir, "a")), startRead(filepath.Join(cl.Mounts[3].Dir, "b")))
	for _, ch := range reads {
		select {
		case r := <-ch:
			if r.err != nil {
				return row, r.err
			}
			row.Clients = append(row.Clients, r.secs)
		case <-ctx.Done():
			return row, ctx.Err()
		}
	}
	row.FirstPair, row.SecondPair = max(row.Clients[0], row.Clients[1]), max(row.Clients[2], row.Clients[3])
	sb, err := serverBytes(ctx, cl)
	row.ServerBytes = sb
	return row, err
}

// overhead: one client reads files of each size cold, OverheadReps times.
func (b *bench) overhead(ctx context.Context) error {
	exp, err := b.export("overhead")
	if err != nil {
		return err
	}
	defer os.RemoveAll(exp)
	name := func(size int64, rep int) string { return fmt.Sprintf("o%d-%d", size, rep) }
	for _, s := range b.cfg.OverheadSizes {
		for r := range b.cfg.OverheadReps {
			if err := writeFile(filepath.Join(exp, name(s, r)), s, uint64(s)+uint64(r)); err != nil {
				return err
			}
		}
	}
	return b.each(ctx, "overhead", 1, exp, nil, func(ctx context.Context, p string, cl *nscluster.Cluster) error {
		for _, s := range b.cfg.OverheadSizes {
			row := OverheadRow{Policy: p, Size: s}
			for r := range b.cfg.OverheadReps {
				secs, err := timed(func() error { _, err := readFile(filepath.Join(cl.Mounts[0].Dir, name(s, r))); return err })
				if err != nil {
					return err
				}
				row.Seconds = append(row.Seconds, secs)
			}
			row.Median = median(row.Seconds)
			b.rep.Overhead = append(b.rep.Overhead, row)
		}
		return nil
	})
}

// warmup: n independent `coopfs warmup`s under none (when it is one of
// the policies), then `coopfs warmup --cluster` under every other policy.
func (b *bench) warmup(ctx context.Context) error {
	exp, err := b.export("warmup")
	if err != nil {
		return err
	}
	defer os.RemoveAll(exp)
	per := max(b.cfg.WarmSize/int64(b.cfg.WarmFiles), 1)
	for i := range b.cfg.WarmFiles {
		if err := writeFile(filepath.Join(exp, "tree", fmt.Sprintf("d%02d", i%8), fmt.Sprintf("f%03d", i)), per, uint64(1000+i)); err != nil {
			return err
		}
	}
	tree := per * int64(b.cfg.WarmFiles)
	b.rep.WarmTree = tree
	run := func(policy, mode string, f func(ctx context.Context, cl *nscluster.Cluster) error) error {
		b.progress("warmup: %s under %s, %d clients", mode, policy, b.cfg.WarmClients)
		cl, err := b.start(ctx, policy, b.cfg.WarmClients, exp, "--cache-size", cacheFor(tree), "--warmup-accept") // every mount holds the tree
		if err == errSkip {
			return nil
		}
		if err != nil {
			return err
		}
		defer cl.Close()
		secs, err := timed(func() error { return f(ctx, cl) })
		if err != nil {
			return fmt.Errorf("%s under %s: %w", mode, policy, err)
		}
		sb, err := serverBytes(ctx, cl)
		if err != nil {
			return err
		}
		b.rep.Warm = append(b.rep.Warm, WarmRow{Mode: mode, Policy: policy, Seconds: secs, ServerBytes: sb, Ratio: sb / float64(tree)})
		return cl.Close()
	}
	if slices.Contains(b.cfg.Policies, "none") { // the baseline: what JuiceFS's and Alluxio's warm-ups do
		err = run("none", "independent", func(ctx context.Context, cl *nscluster.Cluster) error {
			var wg sync.WaitGroup
			errs := make([]error, len(cl.Mounts))
			for i, m := range cl.Mounts {
				wg.Go(func() { errs[i] = b.warmCmd(ctx, filepath.Join(m.Dir, "tree")) })
			}
			wg.Wait()
			return errors.Join(errs...)
		})
		if err != nil {
			return err
		}
	}
	for _, p := range b.cfg.Policies {
		if p == "none" || b.rep.skipped(p) {
			continue
		}
		if err := run(p, "cluster", func(ctx context.Context, cl *nscluster.Cluster) error {
			return b.warmCmd(ctx, "--cluster", filepath.Join(cl.Mounts[0].Dir, "tree"))
		}); err != nil {
			return err
		}
	}
	return nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
