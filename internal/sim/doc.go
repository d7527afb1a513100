// Package sim is coopfs's trace-driven simulator of cooperative caching: the
// framework the algorithms plug into (seed 002 chapter 5, seed 004, seed 000).
//
// The contract, for whoever adds an algorithm:
//
//   - A workload is a replayable stream of Access records (time, client,
//     file, block, op). Workload.Open starts it again from the beginning and
//     yields the same sequence every time; readers stream (memory grows with
//     unique blocks, not with trace length). Trace readers (coopfs text
//     format, LIRS block traces, libCacheSim's oracleGeneral, csv and txt,
//     gzip and zstd, object sizes as blocks or ignored), the converter
//     between them, the lottery merge and seeded generators live here.
//     Run reads trace files and generators ahead on their own goroutine
//     (ReadAheader); closed-loop sources are read in step.
//   - An Algorithm is a deterministic state machine with one method,
//     Access(a, c) Outcome: simulate the access, update the caches, record
//     every message in the Counters (manager messages by cause, lookup
//     messages, replacement messages by cause, hint accuracy, forwards,
//     network messages via Msg), and say which layer served a read. It owns
//     no goroutine and no clock (the access carries virtual time; Counters.Now
//     returns it) and draws randomness only from a generator seeded from
//     Params.Seed. Work per access must be O(1) (hash maps and intrusive
//     lists).
//   - An algorithm that needs the future (Optimal) implements Prescanner;
//     Run feeds it a fresh Source first. If it is also a NextTaker, Run
//     first tries without the prescan, on the next uses the trace carries
//     (Access.Next: libCacheSim's oracleGeneral formats), which the
//     algorithm checks as it goes; at the first that does not hold, Run
//     prescans and starts again. Algorithms that can check their
//     invariants implement Checker, which tests call.
//   - Params are the simulated system and the cost model (defaults: seed 002
//     table 5.2). Algorithm-specific knobs without a field go in
//     Params.Options (key=value), documented by the algorithm.
//   - Run drives one algorithm over one workload: warm-up (counters are
//     replaced by fresh ones after Params.WarmUp accesses), progress, and
//     Metrics, whose JSON keys are stable (docs/sim.md). Read latency is
//     the layer's latency (local, remote, server memory, disk) plus
//     MessageMs per extra hop reported in Outcome.Hops plus Outcome.ExtraMs.
//     Only reads are timed (write-through everywhere, as in seed 002).
//   - Drivers with their own loop (NASD's S servers) can use Recorder
//     directly: Begin, algorithm step, Record, Metrics.
package sim
