package sim

import (
	"context"
	"math"
	"testing"
	"time"
)

// everyOther serves even blocks locally and odd blocks from disk, and sends
// one manager lookup message per miss.
type everyOther struct{}

func (everyOther) Access(a Access, c *Counters) Outcome {
	if a.Op != OpRead {
		return Outcome{}
	}
	if a.Block%2 == 0 {
		return Outcome{Layer: LayerLocal}
	}
	c.Manager(CauseLookup, 1)
	c.Lookup(3)
	return Outcome{Layer: LayerDisk, Hops: 1}
}

func TestRunMetrics(t *testing.T) {
	p := DefaultParams()
	p.Clients, p.WarmUp = 2, 2
	var acc []Access
	for i := range 10 {
		acc = append(acc, Access{Time: time.Duration(i) * time.Second, Client: i % 2, Block: uint64(i)})
	}
	m, err := Run(context.Background(), &Slice{Label: "t", Accesses: acc}, everyOther{}, p, RunOptions{Algorithm: "x"})
	if err != nil {
		t.Fatal(err)
	}
	// After warm-up: blocks 2..9: 4 local, 4 disk.
	if m.Accesses != 8 || m.Hits.Local != 4 || m.Hits.Disk != 4 || m.WarmUp != 2 {
		t.Fatalf("got %+v", m)
	}
	want := (4*0.25 + 4*15.85 + 4*0.2) / 8
	if math.Abs(m.AvgAccessMs-want) > 1e-9 || m.Config != "default" {
		t.Errorf("avg = %v, want %v", m.AvgAccessMs, want)
	}
	if m.LookupMsgsPerMiss != 3 || m.ManagerMsgsPerAccess != 0.5 || m.LocalHitRatio != 0.5 {
		t.Errorf("lookup %v manager %v local %v", m.LookupMsgsPerMiss, m.ManagerMsgsPerAccess, m.LocalHitRatio)
	}
	// Trace no longer than the warm-up: everything counts.
	p.WarmUp = 100
	m, _ = Run(context.Background(), &Slice{Accesses: acc}, everyOther{}, p, RunOptions{})
	if m.Accesses != 10 || m.WarmUp != 0 {
		t.Errorf("short trace: accesses %d warmup %d", m.Accesses, m.WarmUp)
	}
	// A client out of range is an error.
	p.Clients = 1
	if _, err := Run(context.Background(), &Slice{Accesses: acc}, everyOther{}, p, RunOptions{}); err == nil {
		t.Error("client 1 with 1 client: want an error")
	}
}

func TestDefaultParamsValid(t *testing.T) {
	p := DefaultParams()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if p.ClientCacheBlocks != 2048 || p.ServerCacheBlocks != 16384 || p.Clients != 42 {
		t.Errorf("defaults %+v", p)
	}
	p.Clients = 0
	if p.Validate() == nil {
		t.Error("0 clients accepted")
	}
}
