// Package lru holds the one LRU list of coopfs and what it is built from:
// intrusive doubly linked lists over int32 handles (List, Link), an
// open-addressing hash table (Table) and, on top of both, an exact LRU
// cache keyed by any hashable key (Cache). The memory tier
// (internal/cache/mem), the simulator (internal/sim/...) and the hint-based
// clients' age cache (internal/coord/hints) use them instead of copies of
// their own.
//
// Nodes are numbered by int32 handles into the owner's slab (handle 0 is
// nil), and a list's links live in a []Link indexed by handle: a node may
// sit on several lists at once (one []Link per list kind), entries carry no
// pointers (the garbage collector does not scan them) and a link costs 8
// bytes instead of 16. Nothing here is safe for concurrent use.
package lru
