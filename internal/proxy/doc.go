// Package proxy is `coopfs proxy`: a caching proxy between coopfs clients
// and their server (seed 003's cascaded proxy caches). Toward its clients
// it speaks the server's protocol (it listens, handshakes and caps
// connections as the server does, through wire.AcceptLoop and
// wire.ServerHandshake); toward its upstream — a server, or another proxy —
// it speaks the client's (agent.Dial). Proxies therefore cascade:
// client → LAN proxy → WAN proxy → server.
//
// # One upstream connection per client
//
// Every client connection gets its own upstream connection, opened during
// the client's handshake (with the proxy's own certificate or secret, and
// the client's name and boot id) and closed with it. The server thus keeps
// per-client state exactly as it does for a direct client: open handles,
// advisory locks, directory cursors, the reply cache of writes. Handles
// pass through unchanged. A client that dies mid-request takes its
// upstream connection with it, and the server releases its handles and
// locks; an upstream connection that breaks closes the client's, whose
// agent reconnects (through the proxy, which dials upstream afresh) and
// reopens its files. Requests carry the caller's identity (the As
// wrapper) and are relayed unchanged, so the server checks permissions as
// for a direct client. Every message — locks, extended attributes,
// READDIRPLUS, one-way releases — is relayed; what the server sends on its
// own is relayed to the client, except pings, answered here.
//
// # Callbacks
//
// A client's CallbackRegister is relayed on its own upstream connection,
// so the server grants callbacks to that client (through the proxy) and
// sends its breaks there; the proxy relays each CallbackBreak to the
// client and the client's ack back, and the server's break waits for it
// as for a direct client (a client that does not ack in time is
// disconnected, which closes its upstream connection too). The proxy
// itself holds no callbacks (except, under write-back, on its own
// connection, for the write delegations) and grants none: it caches no attributes,
// lookups or opens, only blocks keyed by version, which a change can
// never make wrong — a changed file has a new version.
//
// Write delegations of write-back mounts (DelegateWrite, DelegateReturn)
// travel the same way through a write-through or read-only proxy, and so
// does their recall, a break of kind write: the client writes the file
// back through the proxy, then acks. A write-back proxy holds them itself
// (deleg.go): upstream, on its own connection, it is the one holder of
// its own dirty files and of its clients'; it recalls a client's when the
// upstream recalls the file from it.
//
// # The block cache
//
// Blocks are cached in memory and, with a disk cache directory, in the
// persistent set-associative disk tier (cache/disk), keyed by file, block
// and version. A block read is served from the cache when the client holds
// a readable handle on that file (the upstream checked the open) and asks
// for a version the proxy holds; otherwise it is fetched upstream once
// (concurrent misses share one fetch) and kept. Versions come from the
// upstream's open, attribute and block replies, which the proxy relays and
// reads: an open always reaches the server, so close-to-open consistency
// holds through any chain of proxies — a change through another client or
// another proxy gives a new version at the next open, and blocks of the
// old one never match it. A restarted proxy keeps its disk tier: the
// clients' opens revalidate, and unchanged blocks are served without
// fetching them again.
//
// Blocks served from the cache are counted as the proxy layer, by the
// proxy (coopfs_reads_total{layer="proxy"}) and by the clients (the block
// reply says LayerProxy); misses count at the proxy in the layer the
// upstream named.
//
// # Write policies
//
// read-only refuses every change with EROFS; write-through relays writes
// and keeps whole blocks it relayed, at the version the upstream's reply
// gives, so that a job's results are read back from the proxy. write-back
// completes the clients' writes in dirty frames of the disk tier and
// writes them back later on a connection of the proxy's own, which holds
// the files' write delegations upstream (writeback.go, session.go; the
// journal is cache/wbjournal, shared with the agent's write-back).
//
// The upstream's coordination policy is not offered to the clients: they
// see policy "none", the proxy is their shared cache. Under a `directory`
// or `hints` server the proxy (which has no peer listener) reads through
// the server itself and is never asked to serve a peer.
package proxy
