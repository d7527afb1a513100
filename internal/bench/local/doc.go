// Package local is `coopfs bench local`: one server and one FUSE client on
// this machine, measured side by side with the ceilings of the same run.
//
//   - mem-seq: sequential 1 MiB reads served from the client's memory cache,
//     the kernel page cache of the file dropped before every repetition
//     (posix_fadvise DONTNEED through the mount: the open that follows
//     keeps the — now empty — page cache, so every page is a FUSE READ that
//     the agent serves from memory), against nullfs-seq, the do-nothing
//     go-fuse file system (internal/bench/nullfs) mounted with the same
//     options in its own process, read the same way. Target ratio ≥ 0.8.
//   - pagecache-seq: a re-read right after, which the kernel page cache
//     serves (KEEP_CACHE: the open finds the file unchanged), against
//     export-warm, the same file read from the export directory with a warm
//     page cache. Target ratio ≥ 0.5.
//   - mem-direct: O_DIRECT 1 MiB reads (no page cache at all) against nullfs
//     read the same way.
//   - cold-seq: a fresh server and client after dropping all caches
//     (drop_caches, root only), against export-cold, the export file read
//     after dropping caches.
//   - mem-rand4k: 4 KiB O_DIRECT reads at random offsets from several
//     threads, memory cache warm, against nullfs-rand4k.
//
// The counters of the mount prove the path of each phase: the page-cache
// re-read must cause no agent reads, the memory-cache read no server reads.
package local
