// Package dirsim is the `directory` policy (NFS-cc, seed 000) in the
// simulator. It drives the state machines of internal/coord/directory — the
// server's Directory and one Holder per client — exactly as the live server
// and clients do, and adds only what a simulation needs: LRU client caches,
// the server's memory and disk, and a cost model: each read costs its
// layer's latency and its message hops, as in the classic algorithms; with
// contention=on it also queues at the server's link, the clients' links and
// the disk, so that the seed's bandwidth-contention results (figure 6) show
// in a closed loop (ClockOrder, the nfscc study). Queueing is off by
// default because an open-loop trace's times are nominal: replayed as
// arrivals, a generated trace asks the one disk faster than it serves and
// the queue grows without bound.
//
// Params.Options: policy=directory|none (none is NFS on the same cost
// model: every miss to the server), notify=on|off, queue_len, entries,
// contention=off|on, server_link_mbps, client_link_mbps.
//
// The Directory's failure events (ClientFailed, pings) and its Distrust
// event (a holder whose blocks failed the requesters' digest check, which
// the live server raises after server.BadBlockLimit reports) are not
// driven here: the traces have no failing or lying clients, and neither
// changes a decision for clients that never trigger them.
//
// ClockOrder replays a workload closed-loop (each client issues its next
// read when the previous one completed), as the seed's benchmarks ran;
// Window cuts a generated stream into the seed's first and second runs.
package dirsim
