package disk

import (
	"cmp"
	"errors"
	"slices"

	"github.com/coopfs/coopfs/internal/block"
)

// Taken is a block Relabel took out of the cache: its index in the file
// and its data.
type Taken struct {
	Index uint64
	Data  []byte
}

// Relabel moves the clean frames of file at version from to version to, as
// the memory tier's Relabel does for a writer's own write-through: the file
// changed, but not these blocks. The frames take reports true for (given
// their index and length) are read out and dropped instead, and returned
// for the caller to store again once brought up to date; a frame that fails
// its checksum is dropped. Dirty frames and other versions are left alone.
//
// The new tags take effect at once in memory and reach the bank files at
// the next Sync or Close: a writer of a large file relabels every frame of
// it at each write, which must not cost a disk write per frame. A crash
// before leaves the frames at version from, which simply miss.
func (c *Cache) Relabel(file uint64, from, to block.Version, take func(index uint64, n int) bool) []Taken {
	var out []Taken
	for i := range c.banks {
		lb := &c.banks[i]
		lb.mu.Lock()
		b := lb.b
		frames := make([]int32, 0, len(b.files[file]))
		for _, fr := range b.files[file] {
			frames = append(frames, fr)
		}
		for _, fr := range frames {
			t := b.tags[fr]
			if t.state != stateClean || t.v != from {
				continue
			}
			if take != nil && take(t.id.Index, int(t.n)) {
				if data, err := b.readData(int(fr), nil); err == nil {
					out = append(out, Taken{Index: t.id.Index, Data: data})
				}
				c.invalidate(b, int(fr))
				continue
			}
			t.v, t.seq = to, c.seq.Add(1)
			b.setMem(int(fr), t)
			b.untagged[int(fr)] = struct{}{}
		}
		lb.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b Taken) int { return cmp.Compare(a.Index, b.Index) })
	return out
}

// saveTags writes the tags Relabel changed in memory only (the bank's lock
// held).
func (b *bank) saveTags() error {
	var errs []error
	for fr := range b.untagged {
		if err := b.setTag(fr, b.tags[fr]); err != nil {
			delete(b.untagged, fr) // the frame's old tag stays: it misses
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
