package sim

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func readAll(t *testing.T, src Source) ([]Access, error) {
	t.Helper()
	var out []Access
	for {
		a, err := src.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, a)
	}
}

func TestCoopfsFormat(t *testing.T) {
	in := "# comment\n\n0.5 3 7 2 read\n1 0 7 4 open\n2.25 1 9 0 w\n"
	src, err := NewReader(strings.NewReader(in), FormatCoopfs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAll(t, src)
	if err != nil {
		t.Fatal(err)
	}
	want := []Access{
		{Time: 500 * time.Millisecond, Client: 3, File: 7, Block: 2, Op: OpRead},
		{Time: time.Second, Client: 0, File: 7, Block: 4, Op: OpOpen},
		{Time: 2250 * time.Millisecond, Client: 1, File: 9, Block: 0, Op: OpWrite},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("access %d = %+v, want %+v", i, got[i], want[i])
		}
		// Round trip through the writer.
		src, _ := NewReader(strings.NewReader(FormatAccess(got[i])), FormatCoopfs)
		back, err := readAll(t, src)
		if err != nil || len(back) != 1 || back[0] != got[i] {
			t.Errorf("round trip of %+v: %v %v", got[i], back, err)
		}
	}
	for _, bad := range []string{"1 2 3 4", "x 1 2 3 read", "1 -1 2 3 read", "1 1 2 3 jump", "1 1 2 3 read extra"} {
		src, _ := NewReader(strings.NewReader(bad+"\n"), FormatCoopfs)
		if _, err := readAll(t, src); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("%q: err = %v, want a line-1 error", bad, err)
		}
	}
}

func TestLIRSFormatGzip(t *testing.T) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write([]byte("5\n*\n7\n5\n"))
	zw.Close()
	src, err := NewReader(&buf, FormatLIRS)
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAll(t, src)
	if err != nil || len(got) != 3 || got[0].Block != 5 || got[1].Block != 7 || got[2].Time != 2*LIRSInterval {
		t.Fatalf("got %v, %v", got, err)
	}
	src, _ = NewReader(strings.NewReader("12\nabc\n"), FormatLIRS)
	if _, err := readAll(t, src); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("err = %v", err)
	}
}

func TestMergeLottery(t *testing.T) {
	a := &Slice{Label: "a", Accesses: make([]Access, 300)}
	b := &Slice{Label: "b", Accesses: make([]Access, 100)}
	for i := range a.Accesses {
		a.Accesses[i] = Access{Block: uint64(i)}
	}
	for i := range b.Accesses {
		b.Accesses[i] = Access{Block: uint64(i)}
	}
	m := &Merge{Traces: []Workload{a, b, a}, Seed: 3}
	n, err := m.Clients()
	if err != nil || n != 3 {
		t.Fatalf("clients = %d, %v", n, err)
	}
	got, err := Collect(m)
	if err != nil || len(got) != 700 {
		t.Fatalf("len %d, %v", len(got), err)
	}
	again, _ := Collect(m)
	next := make([]uint64, 3)
	firstHalf := make([]int, 3)
	for i, x := range got {
		if x != again[i] {
			t.Fatal("merge is not deterministic")
		}
		if x.Block != next[x.Client] {
			t.Fatalf("client %d out of order: block %d, want %d", x.Client, x.Block, next[x.Client])
		}
		next[x.Client]++
		if i < 350 {
			firstHalf[x.Client]++
		}
		if ns := x.File >> FileNSShift; (x.Client == 1) != (ns == 1) {
			t.Fatalf("client %d has namespace %d", x.Client, ns)
		}
	}
	// Tickets by length: each trace spans the whole period, so about half of
	// each trace lands in the first half.
	for c, want := range []int{150, 50, 150} {
		if d := firstHalf[c] - want; d < -want/3 || d > want/3 {
			t.Errorf("client %d: %d of its records in the first half, want about %d", c, firstHalf[c], want)
		}
	}
}

func TestGeneratorsDeterministic(t *testing.T) {
	for _, p := range Patterns() {
		cfg := GenConfig{Pattern: p, Clients: 4, Accesses: 3000, Blocks: 100, Files: 50, Private: 20, Seed: 9}
		w, err := Generate(cfg)
		if err != nil {
			t.Fatal(err)
		}
		x, err := Collect(w)
		if err != nil {
			t.Fatal(err)
		}
		y, _ := Collect(w)
		if len(x) != 3000 && p != GenMultiServer || len(x) == 0 {
			t.Fatalf("%s: %d accesses", p, len(x))
		}
		clients := map[int]bool{}
		for i := range x {
			if x[i] != y[i] {
				t.Fatalf("%s: not deterministic at %d", p, i)
			}
			if x[i].Client < 0 || x[i].Client >= 4 {
				t.Fatalf("%s: client %d", p, x[i].Client)
			}
			clients[x[i].Client] = true
		}
		if len(clients) < 2 {
			t.Errorf("%s: only %d clients active", p, len(clients))
		}
		cfg.Seed = 10
		w2, _ := Generate(cfg)
		z, _ := Collect(w2)
		same := len(z) == len(x)
		for i := 0; same && i < len(x); i++ {
			same = x[i] == z[i]
		}
		if same && p != GenSequential {
			t.Errorf("%s: seed does not change the trace", p)
		}
	}
	if _, err := Generate(GenConfig{Pattern: "nope"}); err == nil {
		t.Error("unknown pattern accepted")
	}
}

func TestHotColdShape(t *testing.T) {
	w, _ := Generate(GenConfig{Pattern: GenHotColdGlobal, Clients: 2, Accesses: 20000, Blocks: 1000, Seed: 1})
	acc, _ := Collect(w)
	hot := 0
	for _, a := range acc {
		if a.Block < 200 {
			hot++
		}
	}
	if f := float64(hot) / float64(len(acc)); f < 0.77 || f > 0.83 {
		t.Errorf("hot fraction %.3f, want about 0.8", f)
	}
}

// tracesDir finds the shared public traces (COOPFS_TRACES or ../../../shared/traces).
func tracesDir(t testing.TB) string {
	dir := os.Getenv("COOPFS_TRACES")
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "shared", "traces")
	}
	if _, err := os.Stat(filepath.Join(dir, "cs.trace.gz")); err != nil {
		t.Skipf("public traces not found in %s (set COOPFS_TRACES): %v", dir, err)
	}
	return dir
}

func TestPublicTraces(t *testing.T) {
	dir := tracesDir(t)
	for name, want := range map[string][2]int{"cs": {6781, 1409}, "cpp": {9047, 1223}} {
		acc, err := Collect(&File{Path: filepath.Join(dir, name+".trace.gz"), Format: FormatLIRS})
		if err != nil {
			t.Fatal(err)
		}
		uniq := map[uint64]bool{}
		for _, a := range acc {
			uniq[a.Block] = true
		}
		if len(acc) != want[0] || len(uniq) != want[1] {
			t.Errorf("%s: %d requests, %d distinct; README says %v", name, len(acc), len(uniq), want)
		}
	}
}

func FuzzCoopfsReader(f *testing.F) {
	f.Add([]byte("0.5 3 7 2 read\n# x\n1 0 7 4 open\n"))
	f.Add([]byte("1e400 1 2 3 w\n"))
	f.Add([]byte{0x1f, 0x8b, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		src, err := NewReader(bytes.NewReader(data), FormatCoopfs)
		if err != nil {
			return
		}
		for range 10000 {
			a, err := src.Next()
			if err != nil {
				return
			}
			if a.Client < 0 || a.Op > OpDelete || a.Time < 0 {
				t.Fatalf("bad access %+v", a)
			}
			src2, _ := NewReader(strings.NewReader(FormatAccess(a)), FormatCoopfs)
			b, err := src2.Next()
			if err != nil || b.Client != a.Client || b.File != a.File || b.Block != a.Block || b.Op != a.Op {
				t.Fatalf("round trip %+v -> %+v, %v", a, b, err)
			}
		}
	})
}

func FuzzLIRSReader(f *testing.F) {
	f.Add([]byte("1\n2\n*\n3\n"))
	f.Add([]byte("18446744073709551615\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		src, err := NewReader(bytes.NewReader(data), FormatLIRS)
		if err != nil {
			return
		}
		for range 10000 {
			a, err := src.Next()
			if err != nil {
				return
			}
			if a.Op != OpRead || a.Client != 0 {
				t.Fatalf("bad access %+v", a)
			}
		}
	})
}

// FuzzCoopfsFastPath checks that the one-pass parser of coopfs lines gives
// exactly what the general one gives whenever it accepts a line.
func FuzzCoopfsFastPath(f *testing.F) {
	for _, s := range []string{"0.5 3 7 2 read", "1 0 7 4 open", "12.000001\t41 99999 0 r",
		"1. 2 3 4 w", ".5 1 2 3 d", "1e5 1 2 3 read", "1  2 3 4 read", "0 2147483648 1 1 r",
		"999999999.999999 1 18446744073709551615 1 c", "1 2 3 4 read x"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := trimSpace(data)
		a, ok := parseCoopfsFast(s)
		if !ok {
			return
		}
		var c coopfsReader
		b, err := c.parseSlow(s)
		if err != nil || a != b {
			t.Fatalf("%q: fast %+v, general %+v, %v", s, a, b, err)
		}
	})
}
