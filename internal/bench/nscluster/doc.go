// Package nscluster starts a coopfs cluster on the namespace testbed
// (internal/bench/testbed): `coopfs serve` in the server host and one
// `coopfs mount` per client host, every link shaped with tc tbf, the
// processes' /metrics scraped from the driver through the hosts' network
// namespaces. Mounts live in the shared mount namespace, so the driver reads
// and writes through every client's mountpoint directly while the bytes
// cross that client's shaped link. `coopfs bench replay` and the demo's
// testbed mode run on it; Close (and the end of the context given to Start)
// leaves no namespace, mount or process behind.
package nscluster
