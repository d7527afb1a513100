// Package testbed builds a testbed of real hosts on one Linux machine: one
// network namespace per host (a server and N clients), each joined to a
// private bridge by a veth pair, each with its own IPv4 address from a private
// /24, and each link limited with tc tbf in both directions. It launches
// processes inside the hosts (with their output captured to per-process log
// files), dials and waits for TCP ports inside a host, and tears everything
// down again — on Close, on context cancellation, optionally on SIGINT and
// SIGTERM, and for a crashed earlier run with Cleanup or CleanupStale.
//
// Layout of one testbed with prefix P (for example "cfs4242-1a2b-"):
//
//	namespace P+"hub":    bridge br0, ports v-server, v-client1, ... (tbf on each: traffic towards the host)
//	namespace P+"server": lo, eth0 10.77.0.1/24 (tbf: traffic leaving the host)
//	namespace P+"clientI": lo, eth0 10.77.0.(1+I)/24 (tbf: traffic leaving the host)
//
// Nothing is created in the root network namespace, and the host namespaces
// have no route other than their /24, so test traffic can only reach the
// test hosts or loopback. Processes are started with `nsenter --net`, which
// enters only the host's network namespace: the mount namespace stays the
// caller's, so a FUSE mount made by a process in one host is visible to every
// other process on the machine (mount under distinct mountpoints, e.g. under
// Host.Dir).
//
// The package needs root, iproute2 (ip, tc) and util-linux (nsenter);
// CheckPrereqs says what is missing.
package testbed
