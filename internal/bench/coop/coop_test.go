package coop

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/bench/testbed"
	"github.com/coopfs/coopfs/internal/bench/workload"
	"github.com/coopfs/coopfs/internal/obs"
)

// The test binary doubles as the worker: the e2e test starts it inside the
// testbed's hosts with this variable set.
const workerEnv = "COOPBENCH_TEST_WORKER"

func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) == "1" {
		if err := RunWorker(context.Background(), os.Args[1:], os.Stderr); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestOffsets(t *testing.T) {
	const blocks, reads, clients = 1000, 20000, 4
	seq, err := Offsets(PatSequential, blocks, 2500, 0, clients, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range seq {
		if b != int64(i%blocks) {
			t.Fatalf("sequential read %d is block %d", i, b)
		}
	}
	for _, pat := range []string{PatRandom, PatHotcoldLocal, PatHotcoldGlobal} {
		hotStarts := map[int64]bool{}
		for cl := range clients {
			offs, err := Offsets(pat, blocks, reads, cl, clients, 7)
			if err != nil {
				t.Fatal(err)
			}
			again, _ := Offsets(pat, blocks, reads, cl, clients, 7)
			if !slicesEqual(offs, again) {
				t.Fatalf("%s: not reproducible", pat)
			}
			var inHot int
			hotStart := int64(0)
			if pat == PatHotcoldLocal {
				hotStart = blocks * int64(cl) / clients
			}
			hotStarts[hotStart] = true
			for _, b := range offs {
				if b < 0 || b >= blocks {
					t.Fatalf("%s: block %d out of range", pat, b)
				}
				if (b-hotStart+blocks)%blocks < blocks/5 {
					inHot++
				}
			}
			frac := float64(inHot) / reads
			want := 0.8
			if pat == PatRandom {
				want = 0.2
			}
			if frac < want-0.02 || frac > want+0.02 {
				t.Errorf("%s client %d: %.3f of reads in the hot fifth, want %.2f", pat, cl, frac, want)
			}
		}
		if pat == PatHotcoldLocal && len(hotStarts) != clients {
			t.Errorf("hotcold-local: clients share hot regions: %v", hotStarts)
		}
	}
	if _, err := Offsets("zigzag", 10, 1, 0, 1, 1); err == nil {
		t.Error("unknown pattern accepted")
	}
}

func slicesEqual(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"100MB": 100e6, "4KiB": 4096, "64MiB": 64 << 20, "1e6": 1e6, "12": 12} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "0", "-1MB"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
}

// A worker reading blocks of a plain file finds it equal to itself, and a
// doctored "export" is reported as mismatches.
func TestWorkerVerifies(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	if _, err := workload.WriteFile(f, 256<<10, 3, nil); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "bad")
	b, _ := os.ReadFile(f)
	b[5000] ^= 1
	if err := os.WriteFile(bad, b, 0o644); err != nil {
		t.Fatal(err)
	}
	res := filepath.Join(dir, "r.json")
	args := []string{"--result", res, "--mode", PatRandom, "--file", f, "--reads", "500", "--direct=false"}
	if err := RunWorker(context.Background(), append(args, "--export-file", f), os.Stderr); err != nil {
		t.Fatal(err)
	}
	r, err := readResult(res)
	if err != nil || !r.Verified || r.Ops != 500 || r.MeanUS <= 0 {
		t.Fatalf("result %+v, %v", r, err)
	}
	var stderr bytes.Buffer
	if err := RunWorker(context.Background(), append(args, "--export-file", bad), &stderr); err == nil {
		t.Fatal("a differing block went unnoticed")
	}
	offs, _ := Offsets(PatRandom, 64, 500, 0, 1, 1) // the worker's defaults
	var reads1 int64
	for _, b := range offs {
		if b == 5000/4096 {
			reads1++
		}
	}
	if r, _ := readResult(res); r == nil || r.Verified || r.Mismatches != reads1 {
		t.Fatalf("want %d mismatching reads (of block 1), got %+v", reads1, r)
	}
}

func TestReportsRender(t *testing.T) {
	dir := t.TempDir()
	st := Stats{Forwards: 100, ForwardMisses: 1, Clients: []ClientStats{{Reads: map[string]float64{obs.LayerPeer: 3}}}}
	cr := &CopyReport{ServerLink: "100mbit", ClientLink: "100mbit", ServerMBps: 12, ClientMBps: 12, Size: 1e6,
		Rows: []CopyRow{{Policy: "none", Clients: 1, AggMBps: 11}, {Policy: "directory", Clients: 2, AggMBps: 20, Stats: st}}}
	pr := &PatternsReport{Name: "patterns", Clients: 1, Rows: []PatternRow{
		{Pattern: PatRandom, Variant: VarNone, Run: runCold, MeanUS: 100, Stats: st},
		{Pattern: PatRandom, Variant: VarDirectory, Run: runCold, MeanUS: 40, Stats: st}}}
	ar := &AndrewReport{Median: map[string]map[string]float64{"none": {"Copy": 10}, "directory": {"Copy": 10.1}}}
	for name, r := range map[string]report{"copy": cr, "patterns": pr, "andrew": ar, "fault": &FaultReport{Row: CopyRow{Stats: st}, ClientSeconds: []float64{1}}} {
		var out bytes.Buffer
		r.Table(&out)
		if out.Len() == 0 {
			t.Errorf("%s: empty table", name)
		}
		if err := writeReport(dir, name, r); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if out := tableOf(pr); !strings.Contains(out, "-60%") {
		t.Errorf("patterns table lacks the change vs none:\n%s", out)
	}
	for _, f := range []string{"coop-copy.png", "coop-copy.svg", "coop-patterns-readtime.png", "coop-andrew.svg", "coop-copy.json"} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s missing: %v", f, err)
		}
	}
}

func tableOf(r report) string {
	var b bytes.Buffer
	r.Table(&b)
	return b.String()
}

// needTestbed skips unless the testbed, FUSE and root are available.
func needTestbed(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: no testbed run")
	}
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("needs root on Linux")
	}
	if err := testbed.CheckPrereqs(); err != nil {
		t.Skip(err)
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse")
	}
}

// buildCoopfs builds the coopfs binary for serve and mount.
func buildCoopfs(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "coopfs")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/coopfs/coopfs/cmd/coopfs").CombinedOutput()
	if err != nil {
		t.Fatalf("go build coopfs: %v\n%s", err, out)
	}
	return bin
}

// TestCooperativeReadE2E: a server and 3 clients on shaped links, under
// each cooperative policy. client1 reads a file first (from the server);
// then clients 2 and 3 read it at once. Every reader gets the export's
// bytes, and most of the later readers' blocks come from a peer: under
// directory the server forwards their requests (its counters show it),
// under hints the clients' hints (client1's, handed out on open) send them
// to client1 without asking the server.
func TestCooperativeReadE2E(t *testing.T) {
	needTestbed(t)
	bin := buildCoopfs(t)
	for _, policy := range []string{"directory", "hints"} {
		t.Run(policy, func(t *testing.T) { cooperativeRead(t, bin, policy) })
	}
}

func cooperativeRead(t *testing.T, bin, policy string) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	export := filepath.Join(dir, "export")
	if err := os.MkdirAll(export, 0o755); err != nil {
		t.Fatal(err)
	}
	const size = 16 << 20
	d, err := workload.WriteFile(filepath.Join(export, "f"), size, 9, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := startCluster(ctx, Exec{Coopfs: bin, Worker: []string{self}, Env: []string{workerEnv + "=1"}}, clusterConfig{
		Clients: 3, Policy: policy, ServerLink: "200mbit", ClientLink: "200mbit",
		// A server cache smaller than the file: the server is a holder of
		// few blocks, so round robin goes mostly to the peers.
		ServerCache: "4MiB", Export: export, Dir: filepath.Join(dir, "tb"),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	defer logsOnFailure(t, c)
	args := func(i int, m *mount) []string {
		return []string{"--mode", "copy", "--file", filepath.Join(m.dir, "f"), "--digest", d.String()}
	}
	first, st1, err := c.measure(ctx, "first", []int{0}, args, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// hints hands an opener the hints of the file's last opener: two readers
	// that open at once may be handed each other's (still empty) hints and
	// read from the server, so under hints the later readers read in turn,
	// as in the seed's staggered runs; under directory they read at once.
	phases := [][]int{{1, 2}}
	if policy == "hints" {
		phases = [][]int{{1}, {2}}
	}
	for _, only := range phases {
		res, st2, err := c.measure(ctx, "later", only, args, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range only {
			if i >= len(res) || res[i] == nil || !res[i].Verified || res[i].Bytes != size {
				t.Fatalf("later reader %d: result %+v", i, res)
			}
			t.Logf("later reader %d: %.1f MB/s", i, float64(size)/res[i].Elapsed().Seconds()/1e6)
		}
		checkLaterReaders(t, policy, st2)
	}
	if r := first[0]; r == nil || !r.Verified || r.Bytes != size {
		t.Fatalf("first reader result %+v", r)
	}
	t.Logf("first reader: %.1f MB/s; server served %.0f, forwarded %.0f", float64(size)/first[0].Elapsed().Seconds()/1e6, st1.ServedByServer, st1.Forwards)
}

// checkLaterReaders checks that readers after the first read mostly from
// peers (and, under directory, through forwards).
func checkLaterReaders(t *testing.T, policy string, st2 Stats) {
	t.Helper()
	t.Logf("later readers: requests %.0f, forwards %.0f (misses %.0f), served by server %.0f, peer reads %.0f, timeouts %.0f",
		st2.ServerRequests, st2.Forwards, st2.ForwardMisses, st2.ServedByServer, st2.ReadsBy(obs.LayerPeer),
		st2.Total(func(c *ClientStats) float64 { return c.Timeouts }))
	if policy == "directory" {
		if st2.ServerRequests == 0 {
			t.Fatal("the server saw no requests from the later readers")
		}
		if frac := (st2.Forwards - st2.ForwardMisses) / st2.ServerRequests; frac <= 0.5 {
			t.Errorf("only %.0f%% of the later readers' requests were forwarded to peers (want > 50%%)", 100*frac)
		}
	}
	if peer, remote := st2.ReadsBy(obs.LayerPeer), st2.ReadsBy(obs.LayerPeer)+st2.ReadsBy(obs.LayerServerMemory)+st2.ReadsBy(obs.LayerServerDisk); peer <= remote/2 {
		t.Errorf("clients report %.0f of %.0f remote reads from peers (want > 50%%)", peer, remote)
	}
}

// logsOnFailure logs the tail of the server's and the mounts' logs if t
// failed: the testbed's directory is a temporary one, gone once the test
// ends.
func logsOnFailure(t *testing.T, c *cluster) {
	t.Helper()
	if !t.Failed() {
		return
	}
	procs := []*testbed.Proc{c.serve}
	for _, m := range c.mounts {
		procs = append(procs, m.proc)
	}
	for _, p := range procs {
		t.Logf("%s (last 40 lines):\n%s", p.Log, p.LogTail(40))
	}
}
