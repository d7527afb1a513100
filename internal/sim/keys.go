package sim

import "github.com/coopfs/coopfs/internal/lru"

// Hasher is a key of a Table (lru.Hasher).
type Hasher = lru.Hasher

// Table is the simulator's hash map (lru.Table: open addressing, no
// tombstones under a cache's insert/delete churn).
type Table[K Hasher, V any] = lru.Table[K, V]

// Hash implements Hasher: a multiply-xorshift mix of the file and block.
func (k Key) Hash() uint64 { return Mix(k.File*0x9e3779b97f4a7c15 ^ k.Block) }

// Mix is a 64-bit finalizer (murmur3's fmix64).
func Mix(x uint64) uint64 { return lru.Mix(x) }
