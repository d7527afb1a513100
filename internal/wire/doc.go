// Package wire is the coopfs protocol between clients, servers and peers:
// length-prefixed frames with a fixed 24-byte header, a metadata section
// encoded with varints and a separate, checksummed data section, multiplexed
// by request id so that many requests are in flight on one connection in both
// directions. Every connection runs TLS 1.3 (unless both ends are
// --insecure) and then a versioned handshake that authenticates both ends:
// by certificates of the cluster CA, or by the cluster secret, proven with
// HMACs bound to the TLS session's exported keying material so that a relay
// fails (tls.go, handshake.go). Listeners cap their connections (limits.go).
// docs/protocol.md describes every message and limit; docs/security.md the
// threat model.
//
// The decoder never trusts a length: every frame, string and list is checked
// against the limits in Limits before memory is allocated for it, and a
// malformed frame closes the connection it came on (and only that one).
//
// The request path is kept short (docs/benchmarks-meta.md): a sender writes
// its frame itself when no other frame is being written (writer.go), and a
// server may serve cheap requests on the connection's read loop
// (ConnConfig.Inline), so a metadata round trip crosses no goroutine on the
// server and one (the reader's hand-over of the reply) on the caller. All
// of a connection's deadlines (inline stalls, handler and call timeouts)
// are kept by one timer (watchdog.go): a timer per request woke a thread
// per request.
package wire
