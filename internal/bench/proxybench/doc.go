// Package proxybench is `coopfs bench proxy`: the caching proxy (seed 003)
// on the network-namespace testbed (internal/bench/testbed). The server
// sits behind a WAN-like link (tbf, default 10 Mbit/s); a LAN proxy host
// and two client hosts share a LAN (tbf, default 100 Mbit/s). Each
// repetition writes a new file to the export and measures, side by side:
//
//   - wan-tcp, lan-tcp: the ceilings, the file's bytes sent over one TCP
//     connection from the server host and from the proxy host to a client;
//   - direct: a client mounted directly on the server reads the file (the
//     WAN is the bottleneck);
//   - first: a client behind the proxy reads it (the proxy fetches it over
//     the WAN and keeps it);
//   - second: a second client behind the same proxy reads it: from the
//     proxy, at LAN speed; the server sends nothing;
//   - warm: the proxy and the first client restarted, the proxy on its
//     disk cache, the client with its kernel caches dropped, read it again:
//     the server sends no file data;
//   - client-warm: the second client (mounted with --disk-cache) restarted,
//     kernel caches dropped, reads it again from its own disk cache.
//
// Throughputs are MB/s; ratios compare first and direct with wan-tcp, and
// second and warm with lan-tcp. The server bytes of second and warm are
// read from the server's /metrics and must be 0.
package proxybench
