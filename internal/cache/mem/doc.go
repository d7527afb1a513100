// Package mem is the memory tier of the coopfs block cache: a byte-bounded
// map from block.ID to version-tagged block data with exact LRU replacement.
//
// The replacement logic lives in a non-thread-safe core (lru); Cache wraps it
// with a mutex and runs the eviction callback after unlocking, so a callback
// may call back into the cache or do I/O (discard notifications).
package mem
