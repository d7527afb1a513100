package disk

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"

	"golang.org/x/sys/unix"

	"github.com/coopfs/coopfs/internal/block"
)

// errCorrupt marks a frame whose data does not match its tag's checksum.
var errCorrupt = errors.New("frame data does not match its checksum")

// bank is one bank file and the in-memory copy of its tags. Its methods are
// called with the owning Cache's bank lock held.
//
// INVARIANT: files[f][i] == fr iff tags[fr] is valid with id (f, i); no two
// valid tags of a bank carry the same id (Open resolves duplicates).
type bank struct {
	num   int
	f     *os.File
	g     geometry
	tags  []tag
	files map[uint64]map[uint64]int32 // file → block index → frame
	rng   *rand.Rand
	buf   [tagSize]byte
	// held counts the bank's valid frames and their bytes (read by Stats
	// through the Cache's atomics, maintained by setTag).
	acct *accounting
	// unsynced are the dirty frames written by PutDirtyLazy since the
	// bank's last fdatasync: overwritten in place by the next lazy write
	// of their block (their data was never acknowledged).
	unsynced map[int]struct{}
	// untagged are the frames whose tag Relabel changed in memory only:
	// Sync and Close write them (saveTags).
	untagged map[int]struct{}
}

func (b *bank) lookup(id block.ID) (int, bool) {
	fr, ok := b.files[id.File][id.Index]
	return int(fr), ok
}

// setTag writes t as frame fr's tag (on disk and in memory) and keeps the
// index and the byte accounting in step.
func (b *bank) setTag(fr int, t tag) error {
	if b.f == nil {
		return os.ErrClosed
	}
	t.encode(b.buf[:])
	if _, err := b.f.WriteAt(b.buf[:], int64(fr)*tagSize); err != nil {
		return fmt.Errorf("disk cache: write tag of bank %d frame %d: %w", b.num, fr, err)
	}
	b.setMem(fr, t)
	delete(b.untagged, fr)
	return nil
}

// setMem updates the in-memory tag, index and accounting only.
func (b *bank) setMem(fr int, t tag) {
	if prev := b.tags[fr]; prev.state != stateInvalid {
		if m := b.files[prev.id.File]; m != nil && int(m[prev.id.Index]) == fr {
			delete(m, prev.id.Index)
			if len(m) == 0 {
				delete(b.files, prev.id.File)
			}
		}
		b.acct.add(-1, -int64(prev.n))
	}
	b.tags[fr] = t
	if t.state != stateInvalid {
		m := b.files[t.id.File]
		if m == nil {
			m = map[uint64]int32{}
			b.files[t.id.File] = m
		}
		m[t.id.Index] = int32(fr)
		b.acct.add(1, int64(t.n))
	}
}

// readData reads frame fr's data into buf (a new slice if buf is too
// small) and checks it against its tag.
func (b *bank) readData(fr int, buf []byte) ([]byte, error) {
	data, err := b.readRaw(fr, buf)
	if err == nil {
		err = b.verify(fr, b.tags[fr], data)
	}
	return data, err
}

// readRaw reads frame fr's data into buf (a new slice if buf is too small)
// without checking it.
func (b *bank) readRaw(fr int, buf []byte) ([]byte, error) {
	data, err := readFrame(b.f, b.g.frameOff(fr), b.tags[fr].n, buf)
	if err != nil {
		return nil, fmt.Errorf("disk cache: read bank %d frame %d: %w", b.num, fr, err)
	}
	return data, nil
}

// readFrame reads n bytes at off of a bank file into buf (a new slice if
// buf is too small). It needs no lock: the caller revalidates the tag.
func readFrame(f *os.File, off int64, n uint32, buf []byte) ([]byte, error) {
	if f == nil {
		return nil, os.ErrClosed
	}
	data := buf[:0]
	if cap(buf) < int(n) {
		data = make([]byte, n)
	}
	data = data[:n]
	if _, err := f.ReadAt(data, off); err != nil {
		return nil, err
	}
	return data, nil
}

// verify checks data read from frame fr against its tag t.
func (b *bank) verify(fr int, t tag, data []byte) error {
	if checksum(data) != t.dataCRC {
		return fmt.Errorf("disk cache: bank %d frame %d (block %v): %w", b.num, fr, t.id, errCorrupt)
	}
	return nil
}

func (b *bank) writeData(fr int, data []byte) error {
	if b.f == nil {
		return os.ErrClosed
	}
	if _, err := b.f.WriteAt(data, b.g.frameOff(fr)); err != nil {
		return fmt.Errorf("disk cache: write bank %d frame %d: %w", b.num, fr, err)
	}
	return nil
}

// sync makes the bank's writes so far durable.
func (b *bank) sync() error {
	if b.f == nil {
		return os.ErrClosed
	}
	if err := unix.Fdatasync(int(b.f.Fd())); err != nil {
		return fmt.Errorf("disk cache: sync bank %d: %w", b.num, err)
	}
	clear(b.unsynced)
	return nil
}

// frame returns the frame number of way w of set s.
func (b *bank) frame(s, w int) int { return w*b.g.Sets + s }

// candidates sorts set s's frames (except skip) the way the seed's
// replacement does: the first invalid or stale frame, else all clean
// frames, else all dirty ones.
func (b *bank) candidates(s, skip int, stale func(uint64) bool) (free int, clean, dirty []int) {
	for w := range b.g.Assoc {
		fr := b.frame(s, w)
		if fr == skip {
			continue
		}
		switch t := b.tags[fr]; {
		case t.state == stateInvalid:
			return fr, nil, nil
		case stale(t.id.File):
			free = fr + 1 // an invalid frame later in the set still wins
		case t.state == stateClean:
			clean = append(clean, fr)
		default:
			dirty = append(dirty, fr)
		}
	}
	if free > 0 {
		return free - 1, nil, nil
	}
	return -1, clean, dirty
}
