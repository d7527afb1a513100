// Package disk is the persistent, set-associative disk tier of the coopfs
// block cache (seed 003): a fixed number of bank files, each holding frames
// of one block's data plus a tag (file, block, version, state, checksums).
//
// # Layout
//
// A cache directory holds a superblock (`superblock`, the geometry), one
// file per bank (`bank-NNNN`), the stale list (`stale`) and the attribute
// and lookup store (`meta`, see MetaStore). A bank file starts with the tag
// area (one 64-byte tag per frame, padded to 4 KiB) followed by the frames'
// data, each frame one block long, so frame data stays page-aligned.
//
// A block (file, index) maps to a bank and a set: the file's blocks are cut
// into runs of `sets` consecutive blocks, a run is hashed to a bank, and the
// blocks of a run go to consecutive sets (rotated by the same hash). Frame
// f of a bank is way f/sets, set f%sets, so consecutive blocks that take
// the same way are consecutive frames of one bank file.
//
// # Replacement
//
// Frames are invalid, clean or dirty. A Put takes, in its set, the frame
// already holding the block (unless that copy is dirty), else an invalid
// frame or one of a stale file, else a random clean frame, else a random
// dirty frame after writing it back through Config.WriteBack.
//
// Fill is Put for a block fetched from the origin: it never replaces a
// dirty copy (a fetch that raced a write-back write). Retag moves a file's
// clean frames to a new version once the agent wrote them back and the
// server named the version of the result.
//
// # Crash safety
//
// Every tag carries a CRC32C of itself and of the frame's data; a frame
// whose tag or data does not match is a miss and is invalidated, so a torn
// write never serves wrong data. A dirty Put is durable when it returns: the
// data and tag are written, then the bank file is fdatasync'd. A block's new
// copy never overwrites its dirty old copy in place: it goes to another way
// of the set, is synced, and only then is the old copy's tag invalidated;
// every tag carries a sequence number, so recovery keeps the newest copy if
// both survive. Invalidating a dirty frame (Remove, RemoveFile, Truncate) is
// synced too. Open rebuilds the index from the tags, so every acknowledged
// dirty frame is found again after a SIGKILL. Tags are 64-byte aligned and
// never straddle a 512-byte sector.
//
// The stale list (MarkStale: files removed or renamed over) is an fsync'd
// append-only journal: a stale file's frames miss, its dirty frames are
// never written back, and its frames are reused first.
//
// # Locking
//
// Each bank has its own mutex, held across that bank's writes (a Put
// checksums its data before taking it). Reads take it only to look up the
// frame and, after reading and checksumming outside it, to check that the
// frame's tag did not change meanwhile (every write changes it). WriteBack
// runs under the lock of the bank being evicted from and must not call the
// cache; OnEvict runs after the lock is released.
package disk
