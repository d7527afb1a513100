// Package hints is the hint-based cooperative caching policy of seed 002
// (Sarkar, chapter 4) as deterministic state machines: no I/O, no
// goroutines, no clock. Time comes in as an argument (any monotonic stamp:
// the simulator passes its access count, a live agent its clock), events
// come in as method calls and the messages to send come out as return
// values. The simulator (internal/sim/hintsim) and the live coopfs
// processes drive this same code.
//
// Two roles, modelled separately:
//
//   - Client: one per client machine. It keeps the metadata of its block
//     cache (which blocks, master copy or not, age), its location hints
//     (block → probable holder of the master copy, with the holder's boot
//     id), its oldest-block list (probable age of the oldest block on every
//     other participant, Free = free memory at first) and what it knows of
//     its peers (boot ids, failed or not). It answers:
//     Read (local hit, or where to send the request), ServeRequest (a peer
//     asks for a block: serve it or follow the hint), Fill and Write (a
//     block arrives or is written; may evict, giving a Forward of a master
//     copy to the best-guess target or a drop), AcceptForward (a master copy
//     arrives from a peer; may evict, giving a Discard of a young master copy
//     for the server's discard cache), ForwardAcked (age exchange),
//     ExportHints/ImportHints (hint hand-off on open), Invalidate, and the
//     failure events PeerFailed, PeerBooted.
//
//   - Server: the file server acting as consistency manager and owner of
//     the server memory. It hands out on open the hints of the last client
//     that opened the file (OpenResult.HintsFrom), keeps file tokens
//     (file-based, write-through consistency: a writer revokes every other
//     holder, which invalidates its blocks), and uses its memory in one of
//     three ways (MemoryUse): a traditional disk cache, part of the
//     cooperative cache (the server memory becomes a participant that
//     receives forwarded master copies), or the discard cache (receives young
//     master copies discarded by mistake; evicts its oldest block first).
//
// Versions: cached blocks carry the file version of their data (the
// server's Version, handed out with every open). A copy of an older version
// is dropped when it is next looked at, wherever it is (token holders are
// invalidated at once; forward targets lazily). A new writer makes a new
// version and keeps its own copies (Client.Revalidate); a writer whose hint
// says the block's master copy is elsewhere (Client.MasterElsewhere) makes
// one more (Server.NewVersion) before writing, so no stale master survives.
// A client that holds the token and is still the last opener can open
// without the manager (Server.OpenIsLocal).
//
// Ages are stamps (the Time of the last reference): a smaller stamp is an
// older block, and Free (the smallest Time) stands for free memory, the
// "infinite age" of the seed.
//
// Boot ids: a hint carries the holder's boot id; a hint whose boot id is
// older than the newest one known for that holder is dropped when used.
// Failures are detected lazily: the driver reports a timeout with
// PeerFailed, after which hints and oldest-block entries naming the peer
// are ignored until PeerBooted.
//
// Documented races (live system only; the sequential simulator never sees
// them but can see the second one): two forwards crossing, and a request
// that reaches the server while the master copy is cached elsewhere (a
// wrong or missing hint), fetch a second master copy of a block. The seed
// accepts this (< 0.01 % of server accesses); the newer master's hint
// propagates and the older one ages out.
package hints
