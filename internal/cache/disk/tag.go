package disk

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/coopfs/coopfs/internal/block"
)

// Frame states, as stored in a tag.
const (
	stateInvalid uint8 = 0
	stateClean   uint8 = 1
	stateDirty   uint8 = 2

	// stateFill is never stored: it asks put for a clean frame that
	// must not replace a dirty copy (Fill).
	stateFill uint8 = 0xff
	// stateDirtyLazy asks put for a dirty frame it need not sync (PutDirtyLazy).
	stateDirtyLazy uint8 = 0xfe
)

const (
	tagSize  = 64
	tagMagic = 0x31544643 // "CFT1" little-endian
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// tag describes one frame. The zero tag is an invalid frame.
type tag struct {
	state   uint8
	id      block.ID
	v       block.Version
	seq     uint64 // cache-wide write sequence: the newest copy of a block wins
	n       uint32 // data length
	dataCRC uint32
}

// encode writes t into b[:tagSize]. An invalid tag encodes as all zeros.
//
//	0 magic u32 | 4 state u8 | 5 pad | 8 file | 16 index | 24 version |
//	32 seq | 40 length u32 | 44 data crc u32 | 48 reserved | 60 tag crc u32
func (t tag) encode(b []byte) {
	b = b[:tagSize]
	clear(b)
	if t.state == stateInvalid {
		return
	}
	binary.LittleEndian.PutUint32(b[0:], tagMagic)
	b[4] = t.state
	binary.LittleEndian.PutUint64(b[8:], t.id.File)
	binary.LittleEndian.PutUint64(b[16:], t.id.Index)
	binary.LittleEndian.PutUint64(b[24:], uint64(t.v))
	binary.LittleEndian.PutUint64(b[32:], t.seq)
	binary.LittleEndian.PutUint32(b[40:], t.n)
	binary.LittleEndian.PutUint32(b[44:], t.dataCRC)
	binary.LittleEndian.PutUint32(b[60:], checksum(b[:60]))
}

// decodeTag reads a tag; anything that is not a whole, checksummed tag of a
// clean or dirty frame no longer than maxLen decodes as invalid (ok false).
func decodeTag(b []byte, maxLen int) (t tag, ok bool) {
	if len(b) < tagSize {
		return tag{}, false
	}
	if binary.LittleEndian.Uint32(b[0:]) != tagMagic ||
		binary.LittleEndian.Uint32(b[60:]) != checksum(b[:60]) {
		return tag{}, false
	}
	t = tag{
		state:   b[4],
		id:      block.ID{File: binary.LittleEndian.Uint64(b[8:]), Index: binary.LittleEndian.Uint64(b[16:])},
		v:       block.Version(binary.LittleEndian.Uint64(b[24:])),
		seq:     binary.LittleEndian.Uint64(b[32:]),
		n:       binary.LittleEndian.Uint32(b[40:]),
		dataCRC: binary.LittleEndian.Uint32(b[44:]),
	}
	if (t.state != stateClean && t.state != stateDirty) || int64(t.n) > int64(maxLen) {
		return tag{}, false
	}
	return t, true
}
