// Package writeback is the write-back engine shared by the write-back
// mounts (internal/agent) and the write-back proxy (internal/proxy):
// writes complete in dirty frames of a disk tier (cache/disk) and reach
// the upstream — the server, or the proxy above — later.
//
// The engine owns what the two have in common:
//
//   - the dirty files: which blocks of each are dirty, their sizes and
//     times as the writer sees them (Overlay), their journal records
//     (cache/wbjournal: where and as whom each is written back, synced
//     before its first dirty frame), the stale list for a file removed or
//     renamed over while dirty, orphans (a removed file still open), and
//     truncation;
//   - the flush: block by block on a handle of the upstream, exactly once
//     (WriteSeq), marking each block clean unless it was rewritten
//     meanwhile, then retagging the file's blocks with the upstream's new
//     version; on demand (FlushAll: coopfs flush, SIGUSR1), in the
//     background (Tuning.Delay, Tuning.HighWater), at Close, and when the
//     upstream recalls a file (Recall);
//   - write delegations: DelegateWrite before a file's first dirty block
//     is acknowledged, DelegateReturn after its write-back, every dirty
//     file declared again on a new connection and then DelegateReturn of
//     wire.SettledIno (the upstream releases what this client's name left
//     orphaned and it did not declare);
//   - crash recovery (Start): the journal paired with the disk tier's
//     dirty frames, declared and written back before the front end serves.
//
// A front end differs in three things, which it supplies: how a file is
// written upstream (Frontend: the connection, its generations, handles and
// WriteSeq numbers), where the data and attributes come from (the Fetch of
// each Write, the NewFile it describes, and Frontend.Settled, told of the
// upstream's version after a write-back), and how recalls cascade (a
// mount's recall arrives on its session; a proxy, which holds its clients'
// delegations upstream together with its own, recalls the file from the
// clients holding it first and then calls Recall, so that a write-back
// mount behind a write-back proxy is written back through both before the
// upstream's open proceeds; it also takes the engine's DelegateWrite and
// DelegateReturn through Frontend.Call, to return a delegation upstream
// only when no client holds the file either). The proxy also hands its
// clients versions of its own for dirty files (Config.Mint).
//
// The semantics (what a user sees) are in docs/consistency.md, "Write-back",
// "Write delegations and recall" and "Write-back at a proxy".
package writeback
