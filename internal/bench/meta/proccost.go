package meta

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// procCost is what a process has cost so far: CPU time, voluntary context
// switches (a thread went to sleep: waiting for the network, a futex, a
// timer) and involuntary ones (a thread was preempted), summed over its
// threads. Unlike a latency, the CPU time and the voluntary switches per
// call hardly change with the machine's load, so they are what compares
// two builds on a shared machine (docs/benchmarks-meta.md); preemptions
// grow with the load.
type procCost struct {
	CPU       time.Duration
	Switches  int64 // voluntary
	Preempted int64 // involuntary
}

// sub is c − o.
func (c procCost) sub(o procCost) procCost {
	return procCost{CPU: c.CPU - o.CPU, Switches: c.Switches - o.Switches, Preempted: c.Preempted - o.Preempted}
}

// readProcCost reads another process's cost from /proc/PID/task/*:
// schedstat's first field (ns on a CPU) and status's ctxt_switches lines.
// A thread that exited is no longer counted (Go rarely ends threads).
func readProcCost(pid int) (procCost, error) {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", pid))
	if err != nil || len(tasks) == 0 {
		return procCost{}, fmt.Errorf("threads of process %d: not found", pid)
	}
	var c procCost
	for _, t := range tasks {
		st, err := os.ReadFile(filepath.Join(t, "schedstat"))
		if err != nil {
			continue // the thread ended meanwhile
		}
		f := bytes.Fields(st)
		if len(f) == 0 {
			continue
		}
		ns, _ := strconv.ParseInt(string(f[0]), 10, 64)
		c.CPU += time.Duration(ns)
		status, err := os.ReadFile(filepath.Join(t, "status"))
		if err != nil {
			continue
		}
		v, nv := ctxtSwitches(status)
		c.Switches += v
		c.Preempted += nv
	}
	return c, nil
}

// ctxtSwitches reads the voluntary_ctxt_switches and
// nonvoluntary_ctxt_switches lines of a /proc status file.
func ctxtSwitches(status []byte) (vol, invol int64) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		k, v, ok := bytes.Cut(sc.Bytes(), []byte(":"))
		if !ok {
			continue
		}
		x, _ := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
		switch string(k) {
		case "voluntary_ctxt_switches":
			vol = x
		case "nonvoluntary_ctxt_switches":
			invol = x
		}
	}
	return vol, invol
}

// selfCost is this process's cost (every thread, exited ones too).
func selfCost() procCost {
	var r syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &r); err != nil {
		return procCost{}
	}
	return procCost{CPU: time.Duration(r.Utime.Nano() + r.Stime.Nano()), Switches: r.Nvcsw, Preempted: r.Nivcsw}
}

// costProbe samples the cost of a set of processes (by role) and of this
// one ("caller") before and after a measured stretch.
type costProbe struct {
	pids   map[string]int
	before map[string]procCost
}

// callerRole is this process: the one making the measured calls.
const callerRole = "caller"

func startCostProbe(pids map[string]int) *costProbe {
	p := &costProbe{pids: pids, before: map[string]procCost{}}
	for role, pid := range pids {
		if c, err := readProcCost(pid); err == nil {
			p.before[role] = c
		}
	}
	p.before[callerRole] = selfCost()
	return p
}

// callCost is a role's cost per measured call.
type callCost struct {
	CPUMicros float64 // µs on a CPU
	Switches  float64 // voluntary context switches
	Preempted float64 // involuntary ones
}

// perCall returns each role's cost since the start divided by calls.
func (p *costProbe) perCall(calls int) map[string]callCost {
	out := map[string]callCost{}
	add := func(role string, now procCost) {
		b, ok := p.before[role]
		if !ok || calls <= 0 {
			return
		}
		d := now.sub(b)
		n := float64(calls)
		out[role] = callCost{CPUMicros: float64(d.CPU.Nanoseconds()) / 1e3 / n,
			Switches: float64(d.Switches) / n, Preempted: float64(d.Preempted) / n}
	}
	for role, pid := range p.pids {
		if c, err := readProcCost(pid); err == nil {
			add(role, c)
		}
	}
	add(callerRole, selfCost())
	return out
}
