package cache

import "github.com/coopfs/coopfs/internal/block"

// Tier is one layer of a block cache (memory, disk). Implementations are safe
// for concurrent use.
//
// Data slices are shared, not copied: Put keeps the slice it is given and Get
// returns that same slice. Callers must treat both as read-only: never modify
// a slice after passing it to Put, nor a slice Get returned.
type Tier interface {
	// Get returns the data of block id if the tier holds it tagged with
	// exactly version v. A block held under any other version is a miss.
	Get(id block.ID, v block.Version) ([]byte, bool)
	// Put stores data as block id at version v, replacing whatever the tier
	// held for id (any version). Data larger than the tier can hold (its
	// capacity; for a tier of fixed-size frames, one frame) is not stored
	// (and any older copy of id is dropped). The tier may evict other
	// blocks to make room.
	Put(id block.ID, v block.Version, data []byte)
	// Remove drops block id (any version); it is a no-op if absent.
	Remove(id block.ID)
	// RemoveFile drops every block of file; it costs O(blocks of that file).
	RemoveFile(file uint64)
	// Stats returns a snapshot of the tier's counters.
	Stats() Stats
}

// Stats is a snapshot of a tier's size and counters.
type Stats struct {
	Entries  int   // blocks held
	Bytes    int64 // sum of the held blocks' data lengths
	Capacity int64 // the bound on Bytes
	// Hits and Misses count Get calls; Evictions counts blocks the tier
	// dropped on its own: to make room, or an old copy superseded by a Put
	// too big to store (not Remove, RemoveFile, or a block replaced by a Put
	// of the same id).
	Hits, Misses, Evictions uint64
}

// HitRatio returns Hits/(Hits+Misses), or 0 before any Get.
func (s Stats) HitRatio() float64 {
	if n := s.Hits + s.Misses; n > 0 {
		return float64(s.Hits) / float64(n)
	}
	return 0
}
