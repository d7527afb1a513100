// Package directory is the `directory` coordination policy (NFS-cc, seed 000):
// a server-side cache directory that forwards a client's miss to another
// client holding the block, and the holder-side rules that answer such a
// forward.
//
// Both halves are deterministic state machines: events in, actions out, no
// I/O, no goroutines, no clock (time comes in as an argument, as a
// time.Duration since any fixed origin). The live server and clients drive
// them, and so does the simulator (internal/sim/dirsim); neither carries a
// second copy of the logic. Neither half is safe for concurrent use: the
// caller serialises calls (one mutex around a Directory or a Holder).
//
// # Server side: Directory
//
// The directory maps a block (file id, block index) to the set of clients
// that cache it, in a table bounded to Config.Entries entries recycled in
// LRU order. On a client's miss (Request) the directory either tells the
// server to serve the block itself (ActServe) or to forward the request to
// one holder (ActForward), chosen round-robin per block; the server itself
// takes part in the rotation while the block is in its memory (ServerCached
// / ServerEvicted). Either way the requester is recorded as a holder at once
// (the optimistic update), so concurrent requests for one block fan out.
// Every action carries the file's current version, which the holder checks.
//
// When a forward fails (the holder answered negatively or the requester timed
// out) the requester asks again (Retry): the server serves it, drops the
// stale holder and counts a miss for it in the miss table; past
// Config.MissThreshold consecutive misses the action also asks the server to
// ping that client. A client that does not answer (PingFailed, Tick past
// Config.PingTimeout, or ClientFailed) is marked failed, is never forwarded
// to again, and its entries are purged. ClientJoined (a fresh mount) purges
// the client's old entries first. Discarded applies a discard notification;
// FileChanged drops a file's entries. A restarted server starts with New.
//
// # Client side: Holder
//
// A Holder answers forwards from the local state of the block (Present with
// a version, Pending, Absent): Send, Wait (send when the pending data
// arrives: ask again then), or Negative; a holder whose version is older
// than the forward's drops its blocks of the file (Reply.DropFile), one whose
// version is newer answers Negative. It also keeps the discard queue:
// Evicted queues a block and returns a batch to send once Config.QueueLen
// blocks are queued; a forward for an absent block returns the queue at once
// (on demand). Admit is the requester-side rule that keeps a reader from
// assembling a file from two versions.
//
// Counters (Stats, ClientStats, HolderStats) are plain structs that the live
// processes export as Prometheus metrics and the simulator reports.
package directory
