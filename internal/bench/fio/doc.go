// Package fio is `coopfs bench fio`: the job set users compare file systems
// by, run with fio (the field's I/O benchmark, Debian's package) on the
// export's ext4 directly, on a FUSE passthrough of it (bindfs) and on
// coopfs (a real `coopfs serve` and `coopfs mount` over loopback with TLS
// and the cluster secret, write-through, and write-back into a disk cache),
// side by side in one run:
//
//   - seq-write-N, N = 1, 4, 16 jobs: 1 MiB writes of --size bytes in all
//     (--size/N per job, a file each), fsync'd at the end (end_fsync).
//   - seq-read-N: the same files read back with 1 MiB reads, cold: the
//     machine's caches dropped (and coopfs restarted, which empties its
//     memory cache) before each.
//   - rand-read-4k and rand-read-4k-direct: 4 KiB random reads of the
//     1-job file by 4 jobs for --rand-runtime, buffered and O_DIRECT,
//     right after seq-read-1 (so each file system's own caches hold what
//     it keeps of the file).
//   - ttfb: the time from open to the first 4 KiB of each of the 16-job
//     files, cold (fio cannot time an open; this step is Go).
//   - small-create, small-read, small-stat: --small-files files of
//     --small-size (10,000 of 128 KiB, as `juicefs bench` does) created,
//     then read whole and stat'ed, each cold, in Go: fio's filecreate and
//     filestat engines time one call, not a file's whole life.
//
// fio runs with --output-format=json; ParseFio reads its figures. Every
// figure is the median of --reps repetitions, the targets interleaved per
// repetition, and each is given with its ratio to ext4 and to the
// passthrough.
package fio
