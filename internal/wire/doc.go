// Package wire is the coopfs protocol between clients, servers and peers:
// length-prefixed frames with a fixed 24-byte header, a metadata section
// encoded with varints and a separate, checksummed data section, multiplexed
// by request id so that many requests are in flight on one connection in both
// directions. A connection starts with a versioned handshake that
// authenticates both ends with the cluster secret (HMAC-SHA256 over fresh
// nonces). docs/protocol.md describes every message and limit.
//
// The decoder never trusts a length: every frame, string and list is checked
// against the limits in Limits before memory is allocated for it, and a
// malformed frame closes the connection it came on (and only that one).
package wire
