// Package wholefile is the collective whole-file caching policy of seed 001
// (C2Cfs) as deterministic state machines: no I/O, no goroutines, no
// clock. The live server and agent (internal/server/pwholefile.go,
// internal/agent/pwholefile.go) and tests drive this same code.
//
// Two parts:
//
//   - Server: per file a commit counter and a valid-cache map (the clients
//     whose copy reflects the last commit). Open hands an opener both; a
//     client that fetched the whole file joins the map (Have); a close
//     after writes commits (Commit): the map becomes {closer} when the
//     counter did not move since the closer's open (and the closer holds
//     the committed version whole), otherwise empty, and the counter grows
//     by one. Every entry is also tied to the file's data version (the live
//     server's version, which names one content for good): a version the
//     map was not built for empties it, so a copy of another content is
//     never handed out as current whatever the counters say.
//
//   - Fetch: the plan of one whole-file fetch from several holders: the
//     file's blocks split into equal segments, one per holder, fetched in
//     chunks; a holder that finishes its segment takes half of the largest
//     segment left (re-split: a slow holder's work moves to the fast
//     ones); a holder that fails gives its chunk in flight and the rest of
//     its segment back for the others, and what no holder fetched is left
//     for the server (Remaining).
package wholefile
