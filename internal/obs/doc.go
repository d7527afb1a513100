// Package obs holds coopfs's logging and metrics helpers: a slog logger
// constructor, Metrics (the counters every process keeps — reads by the layer
// that served them, bytes in and out, messages by type — on a registry of its
// own, never the global one), the /metrics HTTP server, and Fetch, which
// scrapes a process's /metrics for `coopfs stats` and the demo.
//
// The layer names (LayerLocalMemory, ...) are shared with the simulator so
// that live runs and simulations report reads under the same names.
package obs
