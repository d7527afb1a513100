package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coopfs/coopfs/internal/agent"
)

// warmRequest is the JSON body of a "warmup" control request. Paths are
// relative to the mount's root ("" is the root).
type warmRequest struct {
	Paths   []string `json:"paths"`
	Cluster bool     `json:"cluster,omitempty"`
	Clients []string `json:"clients,omitempty"` // --cluster: client names; empty: every connected client
}

// The mount's answers to "warmup": "listed FILES BYTES" once the tree is
// walked, "progress FILES TOTALFILES BYTES TOTALBYTES" lines, under
// --cluster "cluster DONE CLIENTS BYTES TOTALBYTES PHASE NAMES..." lines
// instead, and at the end "done FILES BYTES" or "error MSG".

// serveWarmConn serves one "warmup" request.
func serveWarmConn(ctx context.Context, a *agent.Agent, c net.Conn, dir, body string, log *slog.Logger) {
	var req warmRequest
	if err := json.Unmarshal([]byte(body), &req); err != nil || len(req.Paths) == 0 {
		fmt.Fprintf(c, "error bad warmup request %q: want a JSON object with \"paths\"\n", body)
		return
	}
	var mu sync.Mutex
	line := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(c, format+"\n", args...)
	}
	fail := func(err error) { line("error %s", strings.ReplaceAll(err.Error(), "\n", "; ")) }
	start := time.Now()
	items, err := a.WarmList(ctx, req.Paths)
	if err != nil {
		fail(err)
		return
	}
	var total int64
	for _, it := range items {
		total += int64(it.Size)
	}
	line("listed %d %d", len(items), total)
	if req.Cluster {
		p, err := a.WarmCluster(ctx, items, req.Clients, func(p agent.ClusterProgress) {
			line("cluster %d %d %d %d %s %s", p.ClientsDone, p.Clients, p.Bytes, p.TotalBytes, p.Phase, strings.Join(p.Names, ","))
		})
		if err != nil {
			fail(err)
			return
		}
		log.Info("cluster warm-up done", "mountpoint", dir, "clients", p.Clients, "files", len(items),
			"bytes", human(total), "took", time.Since(start).Round(time.Millisecond).String())
		line("done %d %d %d", len(items), total, p.Clients)
		return
	}
	var last time.Time
	p, err := a.Warm(ctx, items, func(p agent.WarmProgress) {
		if time.Since(last) >= 100*time.Millisecond {
			last = time.Now()
			line("progress %d %d %d %d", p.Files, p.TotalFiles, p.Bytes, p.TotalBytes)
		}
	})
	line("progress %d %d %d %d", p.Files, p.TotalFiles, p.Bytes, p.TotalBytes)
	if err != nil {
		fail(err)
		return
	}
	log.Info("warm-up done", "mountpoint", dir, "files", p.Files, "bytes", human(p.Bytes),
		"took", time.Since(start).Round(time.Millisecond).String())
	line("done %d %d", p.Files, p.Bytes)
}

// runWarmup implements `coopfs warmup PATH...`.
func runWarmup(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("warmup", "[--cluster [--clients a,b]] [--quiet] PATH...\n\n"+
		"Prefetches files or whole trees under a coopfs mount into that mount's caches (memory and disk),\n"+
		"showing progress. Under the directory and hints policies the fetched blocks then serve peers.\n"+
		"With --cluster, a set of clients warm up together: the server splits the files into shares, each\n"+
		"client fetches its share from the server and the rest from its peers, so every byte crosses the\n"+
		"server's link about once.", stderr)
	cluster := fs.Bool("cluster", false, "warm up a set of clients together (needs the directory or hints policy)")
	clients := fs.String("clients", "", "with --cluster: the clients to warm up, by name (--name of their mount), comma-separated; default: every connected client")
	quiet := fs.Bool("quiet", false, "print only the result")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "coopfs warmup: want at least one PATH under a coopfs mount")
		fs.Usage()
		return errUsage
	}
	if *clients != "" && !*cluster {
		return errors.New("--clients names the clients of a --cluster warm-up: add --cluster")
	}
	mount, rels, err := warmTargets(fs.Args())
	if err != nil {
		return err
	}
	req := warmRequest{Paths: rels, Cluster: *cluster}
	if *clients != "" {
		for _, n := range strings.Split(*clients, ",") {
			if n = strings.TrimSpace(n); n != "" {
				req.Clients = append(req.Clients, n)
			}
		}
	}
	body, _ := json.Marshal(req)
	c, err := dialControl(ctx, mount)
	if err != nil {
		return err
	}
	defer c.Close()
	go func() { <-ctx.Done(); c.Close() }()
	if _, err := io.WriteString(c, "warmup "+string(body)+"\n"); err != nil {
		return fmt.Errorf("warm up %s: %w", mount, err)
	}
	err = readWarmReplies(c, mount, newWarmBar(stdout, *quiet))
	if err != nil && ctx.Err() != nil {
		return errors.New("interrupted: the mount stops warming up")
	}
	return err
}

// warmTargets finds the mount the paths are under (the nearest directory
// above each with a mount's control socket) and their paths relative to its
// root. The mount need not be visible here (a mount made in another mount
// namespace is found by its socket).
func warmTargets(paths []string) (string, []string, error) {
	var mount string
	var rels []string
	for _, p := range paths {
		abs, err := canonical(p)
		if err != nil {
			return "", nil, fmt.Errorf("%s: %w", p, err)
		}
		m := ""
		for d := abs; ; d = filepath.Dir(d) {
			if st, err := os.Stat(controlSocket(d)); err == nil && st.Mode()&os.ModeSocket != 0 {
				m = d
				break
			}
			if d == "/" {
				break
			}
		}
		if m == "" {
			return "", nil, fmt.Errorf("%s is not under a coopfs mount of this user (no mount's control socket for it or a directory above it): mount it with `coopfs mount`, or run warmup as the user who mounted it", p)
		}
		if mount != "" && m != mount {
			return "", nil, fmt.Errorf("%s is under the mount %s, %s under %s: warm up one mount at a time", paths[0], mount, p, m)
		}
		mount = m
		rel, _ := filepath.Rel(m, abs)
		if rel == "." {
			rel = ""
		}
		rels = append(rels, rel)
	}
	return mount, rels, nil
}

// dialControl connects to the control socket of the mount at dir.
func dialControl(ctx context.Context, dir string) (net.Conn, error) {
	path := controlSocket(dir)
	c, err := dialControlSocket(ctx, path)
	if err != nil {
		if errors.Is(err, errControlDir) {
			return nil, err
		}
		return nil, fmt.Errorf("the coopfs mount of %s does not answer on its control socket %s (%v): is its `coopfs mount` process still running?", dir, path, err)
	}
	return c, nil
}

func readWarmReplies(r io.Reader, dir string, bar *warmBar) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		kind, rest, _ := strings.Cut(sc.Text(), " ")
		switch kind {
		case "listed":
			var f, b int64
			fmt.Sscan(rest, &f, &b)
			bar.listed(f, b)
		case "progress":
			var f, tf, b, tb int64
			if _, err := fmt.Sscan(rest, &f, &tf, &b, &tb); err == nil {
				bar.progress(f, tf, b, tb)
			}
		case "cluster":
			var done, n, b, tb int64
			var phase, names string
			if _, err := fmt.Sscan(rest, &done, &n, &b, &tb, &phase); err == nil {
				if f := strings.Fields(rest); len(f) > 5 {
					names = f[5]
				}
				bar.cluster(done, n, b, tb, phase, names)
			}
		case "done":
			var f, b, clients int64
			fmt.Sscan(rest, &f, &b, &clients)
			bar.done(dir, f, b, clients)
			return nil
		case "error":
			bar.clear()
			return fmt.Errorf("warm up %s: %s", dir, rest)
		}
	}
	bar.clear()
	if err := sc.Err(); err != nil {
		return fmt.Errorf("warm up %s: %w", dir, err)
	}
	return errors.New("warm up " + dir + ": the mount closed the connection before finishing (did it exit?)")
}

// warmBar shows a warm-up's progress: a bar redrawn in place on a
// terminal, a plain line every few seconds otherwise.
type warmBar struct {
	w      io.Writer
	quiet  bool
	tty    bool
	start  time.Time
	last   time.Time
	drawn  bool
	period time.Duration
}

func newWarmBar(w io.Writer, quiet bool) *warmBar {
	b := &warmBar{w: w, quiet: quiet, start: time.Now(), period: 2 * time.Second}
	if f, ok := w.(*os.File); ok {
		if _, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS); err == nil {
			b.tty, b.period = true, 100*time.Millisecond
		}
	}
	return b
}

func (b *warmBar) due() bool {
	if b.quiet || time.Since(b.last) < b.period {
		return false
	}
	b.last = time.Now()
	return true
}

func (b *warmBar) listed(files, bytes int64) {
	if !b.quiet && !b.tty {
		fmt.Fprintf(b.w, "warmup: %d files, %v to fetch\n", files, human(bytes))
	}
}

// rateETA is the rate so far and the time left at that rate.
func (b *warmBar) rateETA(done, total int64) (string, string) {
	el := time.Since(b.start).Seconds()
	if el <= 0 || done <= 0 {
		return "-", "-"
	}
	rate := float64(done) / el
	eta := time.Duration(float64(total-done) / rate * float64(time.Second)).Round(time.Second)
	return human(int64(rate)) + "/s", eta.String()
}

func (b *warmBar) progress(f, tf, by, tb int64) {
	if !b.due() {
		return
	}
	rate, eta := b.rateETA(by, tb)
	if !b.tty {
		fmt.Fprintf(b.w, "warmup: %d/%d files, %v/%v, %s, ETA %s\n", f, tf, human(by), human(tb), rate, eta)
		return
	}
	b.draw(fmt.Sprintf("%s %d/%d files %v/%v %s ETA %s", bar(by, tb), f, tf, human(by), human(tb), rate, eta))
}

func (b *warmBar) cluster(done, n, by, tb int64, phase, names string) {
	if !b.due() {
		return
	}
	rate, eta := b.rateETA(by, tb)
	if !b.tty {
		fmt.Fprintf(b.w, "warmup --cluster: %s, %d/%d clients done, %v/%v (all clients), %s, ETA %s\n", phase, done, n, human(by), human(tb), rate, eta)
		return
	}
	b.draw(fmt.Sprintf("%s %s %d/%d clients %v/%v %s ETA %s", bar(by, tb), phase, done, n, human(by), human(tb), rate, eta))
}

func (b *warmBar) draw(s string) {
	fmt.Fprintf(b.w, "\r\033[K%s", s)
	b.drawn = true
}

func (b *warmBar) clear() {
	if b.drawn {
		fmt.Fprint(b.w, "\r\033[K")
		b.drawn = false
	}
}

// done prints the summary; clients > 0 for a cluster warm-up (bytes are
// then each client's).
func (b *warmBar) done(dir string, files, bytes, clients int64) {
	b.clear()
	el := time.Since(b.start)
	rate := "-"
	if s := el.Seconds(); s > 0 {
		rate = human(int64(float64(bytes*max(clients, 1))/s)) + "/s"
	}
	if clients > 0 {
		fmt.Fprintf(b.w, "warmed up %s on %d clients: %d files, %v each in %s (%s in all)\n", dir, clients, files, human(bytes), el.Round(time.Millisecond), rate)
		return
	}
	fmt.Fprintf(b.w, "warmed up %s: %d files, %v in %s (%s)\n", dir, files, human(bytes), el.Round(time.Millisecond), rate)
}

// bar draws a 24-cell bar of done out of total.
func bar(done, total int64) string {
	const cells = 24
	n := cells
	if total > 0 {
		n = int(min(done, total) * cells / total)
	}
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", cells-n) + "]"
}

// human writes a byte count for people: 6.0 MiB, 312 KiB, 100 B.
func human(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, suffix := float64(n)/unit, "KiB"
	for _, s := range []string{"MiB", "GiB", "TiB"} {
		if v < unit {
			break
		}
		v, suffix = v/unit, s
	}
	return fmt.Sprintf("%.1f %s", v, suffix)
}
