package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrMalformed is returned (wrapped) for a metadata section that does not
// decode: truncated, trailing bytes, or a length past its limit.
var ErrMalformed = errors.New("malformed message")

// Per-field limits of the metadata encoding.
const (
	maxString = MaxPath // a path or a symlink target
	maxList   = 1 << 16 // entries of a directory page or a discard batch
)

// MaxPath is the longest path (from the export root) or other string a
// message carries: 16 × PATH_MAX. The server resolves a path of any length
// up to it (in chunks under PATH_MAX, internal/server resolve.go); a
// request naming a longer one fails at the sender with ENAMETOOLONG, as
// it would have to at the receiver's decoder (which drops the connection
// on a string past its limit). The bound keeps what one path costs in the
// server's and agents' tables keyed by path to 64 KiB.
const MaxPath = 64 << 10

// encoder appends varint-encoded fields to a buffer. long is set when a
// string or byte field is longer than the decoder takes (the frame must
// not be sent).
type encoder struct {
	b    []byte
	long bool
}

func (e *encoder) u64(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) u32(v uint32) { e.u64(uint64(v)) }
func (e *encoder) i64(v int64)  { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) str(s string) {
	e.long = e.long || len(s) > maxString
	e.u64(uint64(len(s)))
	e.b = append(e.b, s...)
}
func (e *encoder) bytes(p []byte) { e.u64(uint64(len(p))); e.b = append(e.b, p...) }
func (e *encoder) boolean(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

// decoder reads fields back; the first error sticks and later reads return
// zero values, so a decode function checks d.err once at the end.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: bad %s", ErrMalformed, what)
	}
}

func (d *decoder) u64() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("integer")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) u32() uint32 {
	v := d.u64()
	if v > 1<<32-1 {
		d.fail("32-bit integer")
		return 0
	}
	return uint32(v)
}

func (d *decoder) i64() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("integer")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) boolean() bool {
	if d.err != nil {
		return false
	}
	if len(d.b) < 1 || d.b[0] > 1 {
		d.fail("boolean")
		return false
	}
	v := d.b[0] == 1
	d.b = d.b[1:]
	return v
}

func (d *decoder) raw(limit int) []byte {
	n := d.u64()
	if d.err != nil {
		return nil
	}
	if n > uint64(limit) || n > uint64(len(d.b)) {
		d.fail("length")
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

// optRaw is raw for an optional field: nil when empty.
func (d *decoder) optRaw(limit int) []byte {
	p := d.raw(limit)
	if len(p) == 0 {
		return nil
	}
	return p
}

func (d *decoder) str() string { return string(d.raw(maxString)) }

// count reads a list length and checks it against maxList and against the
// bytes left (each element takes at least minSize bytes).
func (d *decoder) count(minSize int) int {
	n := d.u64()
	if d.err != nil {
		return 0
	}
	if n > maxList || n*uint64(minSize) > uint64(len(d.b)) {
		d.fail("list length")
		return 0
	}
	return int(n)
}

// encodeList writes a list: its length, then each element by one.
func encodeList[T any](e *encoder, xs []T, one func(*encoder, T)) {
	e.u64(uint64(len(xs)))
	for _, x := range xs {
		one(e, x)
	}
}

// decodeList reads a list written by encodeList (nil when empty); each
// element takes at least minSize bytes (decoder.count).
func decodeList[T any](d *decoder, minSize int, one func(*decoder) T) []T {
	n := d.count(minSize)
	if n == 0 {
		return nil
	}
	xs := make([]T, n)
	for i := range xs {
		xs[i] = one(d)
	}
	return xs
}

func (d *decoder) done() error {
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes")
	}
	return d.err
}
