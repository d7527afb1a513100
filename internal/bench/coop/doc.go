// Package coop runs the cooperative-read benchmarks of seed 000 (section
// IV) on a testbed of real hosts: a `coopfs serve` and N `coopfs mount`
// processes in their own network namespaces with tc-shaped links
// (internal/bench/testbed), a workload process per client host reading
// through that host's mount, and every process's counters collected.
//
// The benchmarks (Main's subcommands, `coopfs bench coop SUBCOMMAND`):
//
//	copy      concurrent copy: N clients read one large file at once
//	          (seed figure 5), policies none and directory
//	patterns  sequential, random, hotcold-local, hotcold-global 4 KiB
//	          reads, cold and warm (seed figure 6, tables 2-3)
//	discard   forward miss rate with and without discard notifications
//	          (seed tables 4-5)
//	andrew    an Andrew-style run through one client (seed table 1)
//	fault     SIGKILL one serving client during a concurrent copy
//	replot    redraw the plots of a saved JSON report
//
// Workloads run as separate processes inside the client hosts: the driver
// re-executes itself with the worker subcommand (RunWorker), which prints
// nothing but writes a JSON Result to the file it is given. Every reader
// checks what it read against the export (SHA-256 for whole files, a
// byte comparison with the export for block reads).
//
// The results, the commands and an analysis of the live system's limits
// are in docs/benchmarks-coop.md. The driver needs root, iproute2, nsenter and FUSE; without them Main
// fails with the testbed's explanation.
package coop
