package study

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/coopfs/coopfs/internal/sim"
)

// The quick scale study's invariants: bounded server messages per access,
// depths that make sense, a directory whose memory grows with its holders,
// and the outputs written.
func TestScaleQuick(t *testing.T) {
	res, err := Scale(context.Background(), ScaleConfig{Quick: true})
	if err != nil {
		t.Fatal(err)
	}
	c := res.Config
	if want := len(scalePatterns) * len(c.Clients) * len(c.Algorithms); len(res.Points) != want {
		t.Fatalf("%d points, want %d", len(res.Points), want)
	}
	for _, p := range res.Points {
		// a miss costs the server at most a request, a forward, a retry
		// and its reply, and a notification of the block's eviction
		if p.MsgsPerAccess <= 0 || p.MsgsPerAccess > 7 {
			t.Errorf("%s %s %d: %.3f server messages an access", p.Algorithm, p.Pattern, p.Clients, p.MsgsPerAccess)
		}
		if p.MsgsPerClientSecond <= 0 || p.MsgsPerClientSecond > 7*c.Rate*1.01 {
			t.Errorf("%s %s %d: %.1f messages a client-second at %g reads a client-second", p.Algorithm, p.Pattern, p.Clients, p.MsgsPerClientSecond, c.Rate)
		}
		d := p.Depth
		if d.Mean < 0 || d.P99 < 0 || d.P99 > d.Max || d.Waited > d.Reads || (d.Max > 0) != (d.Mean > 0) {
			t.Errorf("%s %s %d: depths %+v", p.Algorithm, p.Pattern, p.Clients, d)
		}
		if p.Metrics.Reads != p.Metrics.Accesses {
			t.Errorf("%s %s %d: %d reads of %d accesses", p.Algorithm, p.Pattern, p.Clients, p.Metrics.Reads, p.Metrics.Accesses)
		}
	}
	for _, pat := range scalePatterns {
		small, _ := res.find("directory", pat, c.Clients[0])
		large, _ := res.find("directory", pat, c.Clients[len(c.Clients)-1])
		fs, fl := small.Footprint, large.Footprint
		if fl.Holders <= fs.Holders || fl.Bytes() <= fs.Bytes() || fs.Holders == 0 {
			t.Errorf("%s: directory %d holders %d bytes at %d clients, %d holders %d bytes at %d", pat,
				fs.Holders, fs.Bytes(), small.Clients, fl.Holders, fl.Bytes(), large.Clients)
		}
		if large.Clients > 64 && fl.MoreLists == 0 {
			t.Errorf("%s: %d clients and no holder lists beyond 64", pat, large.Clients)
		}
		if large.Depth.Reads == 0 {
			t.Errorf("%s: no read served by a peer at %d clients", pat, large.Clients)
		}
	}
	// checkpoint: all read the same blocks at about the same time; the
	// many late readers are served by peers, some of them still waiting
	if p, _ := res.find("directory", FanoutCheckpoint, c.Clients[len(c.Clients)-1]); p.PeerFraction < 0.9 {
		t.Errorf("checkpoint: %.2f of the misses from peers", p.PeerFraction)
	}

	rep := res.Report()
	var txt bytes.Buffer
	files, err := WriteReport(&txt, rep, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"msgs/client-s", "depth mean", "checkpoint", "zipf", "hints"} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("text output lacks %q", want)
		}
	}
	if len(files) != 2+len(rep.Tables)+2*len(rep.Plots) {
		t.Fatalf("files %v", files)
	}
	for _, f := range files {
		if st, err := os.Stat(f); err != nil || st.Size() == 0 {
			t.Fatalf("output %s: %v", f, err)
		}
	}
	t.Log(txt.String())

	st, err := LookupStudy("scale")
	if err != nil {
		t.Fatal(err)
	}
	if r, err := st.Run(context.Background(), &Env{Quick: true, Params: sim.DefaultParams()}); err != nil || len(r.Rows) != len(res.Points) {
		t.Fatalf("registered study: %v, %d rows", err, len(r.Rows))
	}
}

// The fan-out workload yields every client's reads, in time order, the
// same at every Open.
func TestFanoutWorkload(t *testing.T) {
	for _, cfg := range []FanoutConfig{
		{Pattern: FanoutCheckpoint, Clients: 7, Rate: 50, Stagger: 1e9, Blocks: 9, Seed: 2},
		{Pattern: FanoutZipf, Clients: 5, Rate: 10, Stagger: 1e8, Files: 30, FileBlocks: 3, Reads: 4, Alpha: 1.2, Seed: 2},
	} {
		w, err := NewFanout(cfg)
		if err != nil {
			t.Fatal(err)
		}
		a, err := sim.Collect(w)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := sim.Collect(w)
		per := cfg.Blocks + cfg.Reads*cfg.FileBlocks
		if len(a) != cfg.Clients*per || len(b) != len(a) {
			t.Fatalf("%s: %d and %d accesses, want %d", cfg.Pattern, len(a), len(b), cfg.Clients*per)
		}
		counts := make([]int, cfg.Clients)
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("%s: access %d differs between opens", cfg.Pattern, i)
			}
			if i > 0 && a[i].Time < a[i-1].Time {
				t.Fatalf("%s: access %d at %v before %v", cfg.Pattern, i, a[i].Time, a[i-1].Time)
			}
			if cfg.Pattern == FanoutZipf && int(a[i].Block) != counts[a[i].Client]%cfg.FileBlocks {
				t.Fatalf("zipf: client %d's read %d is block %d of its file", a[i].Client, counts[a[i].Client], a[i].Block)
			}
			counts[a[i].Client]++
		}
	}
	if _, err := NewFanout(FanoutConfig{Pattern: "nope", Clients: 1, Rate: 1}); err == nil {
		t.Fatal("unknown pattern accepted")
	}
}
