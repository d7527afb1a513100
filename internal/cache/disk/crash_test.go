package disk

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/cache/cachetest"
)

// The crash test's child process: it opens the cache named by
// COOPFS_DISK_CRASH_DIR and does random writes until it is killed,
// printing "b F I" before an operation on block (F, I) and, once it
// returned, "d F I V" (PutDirty), "c F I V" (Put) or "r F I" (Remove);
// "bf F" before an operation on file F and "t F SIZE" (Truncate) or "s F"
// (MarkStale) after it; "w F I V" when the write-back function is called
// for a block.
const crashEnv = "COOPFS_DISK_CRASH_DIR"

func crashConfig(dir string, wb WriteBackFunc) Config {
	return Config{Dir: dir, Size: 32 * testBS, BlockSize: testBS, Banks: 2, Assoc: 4, WriteBack: wb}
}

// crashLen is the data length of version v of id: any hit can be checked.
func crashData(id block.ID, v block.Version) []byte {
	return cachetest.Data(id, v, 1+int(mix(uint64(v)^id.File<<8^id.Index)%testBS))
}

func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashEnv)
	if dir == "" {
		t.Skip("run by TestCrashSIGKILL")
	}
	out := bufio.NewWriter(os.Stdout)
	say := func(format string, a ...any) {
		fmt.Fprintf(out, format+"\n", a...)
		out.Flush() // every line reaches the parent before the next step
	}
	c, err := Open(crashConfig(dir, func(id block.ID, v block.Version, d []byte) error {
		say("w %d %d %d", id.File, id.Index, v)
		return nil
	}))
	if err != nil {
		say("error %v", err)
		return
	}
	gen, _ := strconv.ParseUint(os.Getenv(crashEnv+"_GEN"), 10, 64)
	rng := rand.New(rand.NewPCG(gen, 1))
	say("ready")
	for v := block.Version(gen); ; v++ {
		id := block.ID{File: uint64(rng.IntN(4)), Index: uint64(rng.IntN(16))}
		switch r := rng.IntN(100); {
		case r >= 95:
			say("bf %d", id.File)
			size := int64(rng.IntN(16 * testBS))
			if err := c.Truncate(id.File, size); err != nil {
				say("error %v", err)
				return
			}
			say("t %d %d", id.File, size)
			continue
		case r >= 92:
			say("bf %d", id.File)
			if err := c.MarkStale(id.File); err != nil {
				say("error %v", err)
				return
			}
			say("s %d", id.File)
			continue
		}
		say("b %d %d", id.File, id.Index)
		switch r := rng.IntN(100); {
		case r < 70:
			if err := c.PutDirty(id, v, crashData(id, v)); err != nil {
				say("error %v", err)
				return
			}
			say("d %d %d %d", id.File, id.Index, v)
		case r < 90:
			c.Put(id, v, crashData(id, v))
			say("c %d %d %d", id.File, id.Index, v)
		default:
			c.Remove(id)
			say("r %d %d", id.File, id.Index)
		}
	}
}

// crashState is what the parent knows: per block, the last acknowledged
// operation, and whether that dirty version was written back.
type crashState struct {
	dirty      map[block.ID]block.Version // acknowledged dirty, not written back
	maybe      map[block.ID]block.Version // written back: may or may not be dirty
	inFlight   *block.ID
	inFlightOf *uint64 // a whole-file operation (Truncate, MarkStale) in flight
}

// unsure reports whether id's state is open: an operation on it or on its
// file was in flight at the kill.
func (s *crashState) unsure(id block.ID) bool {
	return (s.inFlight != nil && *s.inFlight == id) || (s.inFlightOf != nil && *s.inFlightOf == id.File)
}

// dropFile applies an acknowledged Truncate to size (or MarkStale: size 0).
func (s *crashState) dropFile(file uint64, size int64) {
	for _, m := range []map[block.ID]block.Version{s.dirty, s.maybe} {
		for id := range m {
			if id.File == file && int64(id.Index)*testBS >= size {
				delete(m, id)
			}
		}
	}
}

func (s *crashState) apply(line string) error {
	f := strings.Fields(line)
	if len(f) == 0 {
		return nil
	}
	n := make([]uint64, len(f)-1)
	for i := range n {
		n[i], _ = strconv.ParseUint(f[i+1], 10, 64)
	}
	switch f[0] {
	case "error":
		return fmt.Errorf("child: %s", line)
	case "b":
		s.inFlight = &block.ID{File: n[0], Index: n[1]}
	case "bf":
		s.inFlightOf = &n[0]
	case "t", "s":
		size := int64(0)
		if f[0] == "t" {
			size = int64(n[1])
		}
		s.dropFile(n[0], size)
		s.inFlightOf = nil
	case "d", "c", "r":
		id := block.ID{File: n[0], Index: n[1]}
		delete(s.dirty, id)
		delete(s.maybe, id)
		if f[0] == "d" {
			s.dirty[id] = block.Version(n[2])
		}
		s.inFlight = nil
	case "w":
		id := block.ID{File: n[0], Index: n[1]}
		if s.dirty[id] == block.Version(n[2]) {
			delete(s.dirty, id)
			s.maybe[id] = block.Version(n[2])
		}
	}
	return nil
}

// TestCrashSIGKILL kills a writing child process with SIGKILL at random
// points, several times over one cache directory on a real disk, and checks
// after each kill that every acknowledged dirty block is found again with
// its data (cut by truncations), nothing else is dirty (nothing truncated
// away, nothing of a stale file), and every hit carries the right data.
func TestCrashSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	s := &crashState{dirty: map[block.ID]block.Version{}, maybe: map[block.ID]block.Version{}}
	rng := rand.New(rand.NewPCG(11, 12))
	for round := range 5 {
		s.runChild(t, dir, uint64(round+1)*1_000_000, 30+rng.IntN(300))
		s.check(t, dir, round)
	}
}

func (s *crashState) runChild(t *testing.T, dir string, gen uint64, kill int) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+dir, crashEnv+"_GEN="+strconv.FormatUint(gen, 10))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	acks := 0
	for sc.Scan() {
		if err := s.apply(sc.Text()); err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal(err)
		}
		if strings.HasPrefix(sc.Text(), "d ") {
			if acks++; acks == kill {
				cmd.Process.Signal(syscall.SIGKILL)
				break
			}
		}
	}
	// Lines written before the kill are still in the pipe: read them all.
	for sc.Scan() {
		if err := s.apply(sc.Text()); err != nil {
			t.Fatal(err)
		}
	}
	cmd.Wait()
	if acks < kill {
		t.Fatalf("the child stopped after %d acknowledged writes", acks)
	}
}

func (s *crashState) check(t *testing.T, dir string, round int) {
	c, err := Open(crashConfig(dir, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := map[block.ID]block.Version{}
	for _, d := range c.Dirty() {
		got[d.ID] = d.Version
	}
	for id, v := range s.dirty {
		if s.unsure(id) {
			continue
		}
		if got[id] != v {
			t.Fatalf("round %d: acknowledged dirty block %v v%d is dirty at v%d after SIGKILL", round, id, v, got[id])
		}
	}
	for id, v := range got {
		ok := s.dirty[id] == v || s.maybe[id] == v || s.unsure(id)
		if !ok {
			t.Fatalf("round %d: block %v is dirty at v%d, which was never acknowledged last", round, id, v)
		}
		if d, hit := c.Get(id, v); !hit || !bytes.HasPrefix(crashData(id, v), d) {
			t.Fatalf("round %d: dirty block %v v%d does not read back", round, id, v)
		}
	}
	// No hit carries wrong data: read every frame the index holds.
	for i := range c.banks {
		for _, tg := range c.banks[i].b.tags {
			if tg.state == stateInvalid {
				continue
			}
			if d, hit := c.Get(tg.id, tg.v); hit && !bytes.HasPrefix(crashData(tg.id, tg.v), d) {
				t.Fatalf("round %d: block %v v%d reads back wrong data", round, tg.id, tg.v)
			}
		}
	}
	// The next round starts from what the cache holds now.
	s.dirty, s.maybe, s.inFlight, s.inFlightOf = got, map[block.ID]block.Version{}, nil, nil
	t.Logf("round %d: %d dirty blocks found again, stats %+v", round, len(got), c.Stats())
}
