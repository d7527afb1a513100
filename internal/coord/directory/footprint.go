package directory

import (
	"math/bits"
	"unsafe"

	"github.com/coopfs/coopfs/internal/lru"
)

// Footprint is what a directory holds and the memory it takes, counted from
// its structures' capacities (what the allocator gave them), so that it
// answers "how much memory does coordinating N clients cost".
type Footprint struct {
	Entries int   // live entries: blocks with at least one holder
	Holders int64 // holder records: clients listed over every entry
	// MoreLists is the entries with holders from client 64 on, kept in a
	// list beside the entry's mask.
	MoreLists int

	SlabBytes    int64 // the entries' slab and its free list
	IndexBytes   int64 // block → entry: the hash table, or the dense slots (with the caller's words in them)
	MoreBytes    int64 // the holder lists beyond 64 clients
	ListBytes    int64 // the LRU and per-file lists' links and the file table
	MemoryBytes  int64 // the server's memory set (hashed directories only: dense ones keep it in the slots)
	ClientBytes  int64 // per-client state
	ForwardBytes int64 // the recent-forward ring (Config.ForwardMemory) and its index
}

// Bytes is the total.
func (f Footprint) Bytes() int64 {
	return f.SlabBytes + f.IndexBytes + f.MoreBytes + f.ListBytes + f.MemoryBytes + f.ClientBytes + f.ForwardBytes
}

// BytesPerHolder is the total over the holder records (0 with none).
func (f Footprint) BytesPerHolder() float64 {
	if f.Holders == 0 {
		return 0
	}
	return float64(f.Bytes()) / float64(f.Holders)
}

// Footprint walks the directory (O(entries)) and returns what it holds and
// its memory. The word sizes are this build's (unsafe.Sizeof), so the
// figure is the running process's, not an estimate from field lists.
func (d *Directory) Footprint() Footprint {
	t := d.tab
	var f Footprint
	f.Entries = t.len()
	for h := range t.ents {
		e := &t.ents[h]
		if e.used == 0 {
			continue
		}
		f.Holders += int64(bits.OnesCount64(e.mask))
		if e.more != 0 {
			f.MoreLists++
			f.Holders += int64(len(t.more[e.more]))
		}
	}
	const handle = int64(unsafe.Sizeof(int32(0)))
	f.SlabBytes = int64(cap(t.ents))*int64(unsafe.Sizeof(entry{})) + int64(cap(t.free))*handle
	f.IndexBytes = t.index.Bytes() + int64(cap(t.slot))*int64(unsafe.Sizeof(Slot{}))
	f.MemoryBytes = t.mem.Bytes()
	f.MoreBytes = int64(cap(t.more))*int64(unsafe.Sizeof([]ClientID(nil))) + int64(cap(t.moreFree))*handle
	for _, hs := range t.more {
		f.MoreBytes += int64(cap(hs)) * int64(unsafe.Sizeof(ClientID(0)))
	}
	link := int64(unsafe.Sizeof(lru.Link{}))
	f.ListBytes = int64(cap(t.lruLk)+cap(t.fileLk))*link + t.files.Bytes()
	ptr := int64(unsafe.Sizeof((*clientState)(nil)))
	// a Go map's buckets are not visible: count a pointer and a key per
	// large client, beside each state, a lower bound
	f.ClientBytes = int64(cap(d.clients.small))*ptr + int64(d.clients.len())*int64(unsafe.Sizeof(clientState{})) +
		int64(len(d.clients.large))*(ptr+int64(unsafe.Sizeof(ClientID(0))))
	f.ForwardBytes = int64(cap(d.ring))*int64(unsafe.Sizeof(fwdRec{})) + d.ringIdx.Bytes() +
		int64(cap(d.discards))*handle
	return f
}
