package meta

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// The metadata round trip probe: RTTFiles empty files are created in a
// fresh directory, the kernel's entry cache of them is left to expire
// (RTTWait, past the 1 s entry timeout of the FUSE targets), then each file
// is lstat-ed once and the time of every call is recorded. On a FUSE target
// each call is one LOOKUP (the kernel revalidates the expired entry, and the
// reply carries the attributes); on coopfs that is one Lookup message, FUSE
// op → agent → wire → server → back. Target of issue 9: ≤ 50 µs median.
const (
	RTTFiles     = 1000
	RTTWait      = 1200 * time.Millisecond
	TargetRTTMus = 50.0
	rttDir       = "bench-meta-rtt"
	StepRTT      = "stat-rtt"
	UnitMicros   = "µs"
)

// rttProbe is one run of the probe on a target.
type rttProbe struct {
	lat   []float64           // µs per call
	msgs  map[string]float64  // the messages t's client sent (nil if none)
	costs map[string]callCost // per call, by process role (and callerRole)
}

// probeRTT runs the probe on t: the per-call latencies, the messages t's
// client sent during the calls, and what each of t's processes (and this
// one) spent per call.
func probeRTT(ctx context.Context, t target) (*rttProbe, error) {
	dir := filepath.Join(t.root(), rttDir)
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%s: %w", StepRTT, err)
	}
	defer os.RemoveAll(dir)
	names := make([]string, RTTFiles)
	for i := range names {
		names[i] = filepath.Join(dir, fmt.Sprintf("f%04d", i))
		if err := os.WriteFile(names[i], nil, 0o644); err != nil {
			return nil, fmt.Errorf("%s: %w", StepRTT, err)
		}
	}
	select {
	case <-time.After(RTTWait):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	before, err := t.messages(ctx)
	if err != nil {
		return nil, err
	}
	p := &rttProbe{lat: make([]float64, 0, len(names))}
	cost := startCostProbe(t.procs())
	for _, n := range names {
		start := time.Now()
		if _, err := os.Lstat(n); err != nil {
			return nil, fmt.Errorf("%s: %w", StepRTT, err)
		}
		p.lat = append(p.lat, float64(time.Since(start).Nanoseconds())/1e3)
	}
	p.costs = cost.perCall(len(names))
	if before == nil {
		return p, nil
	}
	after, err := t.messages(ctx)
	if err != nil {
		return nil, err
	}
	p.msgs = subMessages(after, before)
	return p, nil
}

// quantile of sorted xs, q in [0, 1].
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// addRTT records one probe: the median per call as a sample of the
// target's row, the 90th percentile as a sample of its p90 row, and each
// process's CPU time and context switches per call.
func (r *run) addRTT(tname string, p *rttProbe) {
	s := slices.Clone(p.lat)
	slices.Sort(s)
	r.res.Get(RowKey(StepRTT, tname)).Add(quantile(s, 0.5))
	r.res.Get(RowKey(StepRTT+"-p90", tname)).Add(quantile(s, 0.9))
	for role, c := range p.costs {
		key := RowKey(StepRTT+"-cpu", tname+"-"+role)
		r.res.Row(key, fmt.Sprintf("lstat of a name whose entry expired, CPU time per call, %s %s", tname, role), UnitCPUMicros).Add(c.CPUMicros)
		key = RowKey(StepRTT+"-switches", tname+"-"+role)
		r.res.Row(key, fmt.Sprintf("lstat of a name whose entry expired, voluntary context switches per call, %s %s", tname, role), UnitSwitches).Add(c.Switches)
		key = RowKey(StepRTT+"-preempted", tname+"-"+role)
		r.res.Row(key, fmt.Sprintf("lstat of a name whose entry expired, preemptions per call, %s %s", tname, role), UnitSwitches).Add(c.Preempted)
	}
}

// Units of the probe's cost rows.
const (
	UnitCPUMicros = "µs CPU"
	UnitSwitches  = "switches"
)
