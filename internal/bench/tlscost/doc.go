// Package tlscost is `coopfs bench tls`: the cost of TLS, measured side by
// side in one run against --insecure. (Block digests belong to the
// directory policy and run in both modes.) Every repetition
// starts, for each mode in turn, a server (directory policy, balanced
// forwarding) and two FUSE clients on this machine, and measures
//
//   - cold: client 1 reads the file with every cache dropped (server disk
//     → client 1);
//   - peer: client 2 reads it (client 1 sends each block directly; the
//     server hashes each block as it forwards it, client 2 checks it);
//   - memory: client 1 reads it again with the kernel page cache dropped
//     (its own memory cache; no network);
//
// and the CPU time (user + system) of the three processes per GB read in
// each phase, from /proc/PID/stat.
package tlscost
