package wire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// Frame layout, little endian:
//
//	0  u16  magic 0xCF57
//	2  u8   message type
//	3  u8   flags (FlagReply, FlagOneWay)
//	4  u32  metadata length
//	8  u32  data length
//	12 u32  CRC32C of the data section (0 when there is none)
//	16 u64  request id
//	24      metadata, then data
const (
	HeaderSize = 24
	magic      = 0xCF57
)

// ProtocolVersion is the version this build speaks; the handshake rejects others.
const ProtocolVersion = 4

// Frame flags.
const (
	FlagReply  uint8 = 1 << 0 // the frame answers the request with the same id
	FlagOneWay uint8 = 1 << 1 // a request that wants no reply
	knownFlags       = FlagReply | FlagOneWay
)

// Limits bound what a peer may make us allocate.
type Limits struct {
	MaxMeta uint32 // metadata section
	MaxData uint32 // data section: a block or a write
}

// DefaultLimits allow blocks and writes up to 16 MiB and 4 MiB of metadata.
var DefaultLimits = Limits{MaxMeta: 4 << 20, MaxData: 16 << 20}

// Errors of the framing layer; a connection that sees one is closed.
var (
	ErrBadMagic      = errors.New("not a coopfs frame (bad magic)")
	ErrFrameTooLarge = errors.New("frame larger than the limit")
	ErrChecksum      = errors.New("data checksum mismatch")
	ErrUnknownType   = errors.New("unknown message type")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum is the CRC32C used for data sections and cached blocks.
func Checksum(p []byte) uint32 { return crc32.Checksum(p, castagnoli) }

// header is a decoded frame header.
type header struct {
	typ     Type
	flags   uint8
	metaLen uint32
	dataLen uint32
	crc     uint32
	id      uint64
}

func putHeader(b []byte, h header) {
	binary.LittleEndian.PutUint16(b[0:], magic)
	b[2] = byte(h.typ)
	b[3] = h.flags
	binary.LittleEndian.PutUint32(b[4:], h.metaLen)
	binary.LittleEndian.PutUint32(b[8:], h.dataLen)
	binary.LittleEndian.PutUint32(b[12:], h.crc)
	binary.LittleEndian.PutUint64(b[16:], h.id)
}

func parseHeader(b []byte, lim Limits) (header, error) {
	if binary.LittleEndian.Uint16(b[0:]) != magic {
		return header{}, ErrBadMagic
	}
	h := header{
		typ:     Type(b[2]),
		flags:   b[3],
		metaLen: binary.LittleEndian.Uint32(b[4:]),
		dataLen: binary.LittleEndian.Uint32(b[8:]),
		crc:     binary.LittleEndian.Uint32(b[12:]),
		id:      binary.LittleEndian.Uint64(b[16:]),
	}
	if h.flags&^knownFlags != 0 {
		return header{}, fmt.Errorf("%w: unknown flags %#x", ErrMalformed, h.flags)
	}
	if h.metaLen > lim.MaxMeta || h.dataLen > lim.MaxData {
		return header{}, fmt.Errorf("%w: metadata %d bytes, data %d bytes (limits %d, %d)",
			ErrFrameTooLarge, h.metaLen, h.dataLen, lim.MaxMeta, lim.MaxData)
	}
	return h, nil
}

// appendFrame encodes m as a frame: the header and metadata in one buffer,
// the data section (if any) returned separately so it can be written without
// a copy.
func appendFrame(buf []byte, m Msg, flags uint8, id uint64) (head, data []byte) {
	return appendFrameCRC(buf, m, flags, id, true)
}

// appendFrameCRC is appendFrame; without crc the data CRC field is 0 (a
// TLS connection: its AEAD authenticates every byte, and the CRC's pass
// over the data would only cost CPU).
func appendFrameCRC(buf []byte, m Msg, flags uint8, id uint64, crc bool) (head, data []byte) {
	head, data, _ = appendFrameLong(buf, m, flags, id, crc)
	return head, data
}

// appendFrameLong is appendFrameCRC that also reports a string field past
// what the decoder takes (maxString): such a frame must not be sent.
func appendFrameLong(buf []byte, m Msg, flags uint8, id uint64, crc bool) (head, data []byte, long bool) {
	buf = append(buf[:0], make([]byte, HeaderSize)...)
	e := encoder{b: buf}
	m.encode(&e)
	if p, ok := m.(payloader); ok {
		data = p.payload()
	}
	h := header{typ: m.Type(), flags: flags, id: id,
		metaLen: uint32(len(e.b) - HeaderSize), dataLen: uint32(len(data))}
	if len(data) > 0 && crc {
		h.crc = Checksum(data)
	}
	putHeader(e.b, h)
	return e.b, data, e.long
}

// readFrame reads one frame and decodes its message. The header has its own
// buffer and the data section gets a fresh allocation (page-aligned for large
// sizes), so bulk bytes never sit at an odd offset behind a header.
func readFrame(r *bufio.Reader, hdr []byte, lim Limits) (header, Msg, error) {
	return readFrameCRC(r, hdr, lim, true)
}

// readFrameCRC is readFrame; without crc the data CRC is not checked (a TLS
// connection, see appendFrameCRC).
func readFrameCRC(r *bufio.Reader, hdr []byte, lim Limits, crc bool) (header, Msg, error) {
	if _, err := io.ReadFull(r, hdr[:HeaderSize]); err != nil {
		return header{}, nil, err
	}
	h, err := parseHeader(hdr, lim)
	if err != nil {
		return h, nil, err
	}
	meta, err := readSection(r, h.metaLen)
	if err != nil {
		return h, nil, err
	}
	var data []byte
	if h.dataLen > 0 {
		if data, err = readSection(r, h.dataLen); err != nil {
			return h, nil, err
		}
	}
	m, err := decodeMsg(h, meta, data, crc)
	return h, m, err
}

// decodeMsg turns a frame's sections into a message, checking the data
// checksum and that only data-carrying types have data.
func decodeMsg(h header, meta, data []byte, crc bool) (Msg, error) {
	m := newMsg(h.typ)
	if m == nil {
		return nil, fmt.Errorf("%w %d", ErrUnknownType, h.typ)
	}
	d := decoder{b: meta}
	m.decode(&d)
	if err := d.done(); err != nil {
		return nil, fmt.Errorf("%v: %w", h.typ, err)
	}
	p, ok := m.(payloader)
	if as, wrapped := m.(*As); wrapped {
		_, ok = as.Msg.(payloader) // only a wrapped data message carries data
	}
	switch {
	case !ok && len(data) > 0:
		return nil, fmt.Errorf("%w: %v carries no data", ErrMalformed, h.typ)
	case len(data) > 0 && crc && Checksum(data) != h.crc:
		return nil, fmt.Errorf("%v: %w", h.typ, ErrChecksum)
	case len(data) == 0 && h.crc != 0:
		return nil, fmt.Errorf("%w: checksum without data", ErrMalformed)
	case ok:
		p.setPayload(data)
	}
	return m, nil
}

// upfront is the largest section allocated before its bytes arrive (a
// block of the default size and its frame's metadata); a larger one grows
// as its bytes arrive, so that a header alone cannot make a process
// allocate the limit (Limits): a peer that claims 16 MiB and sends none
// costs this much.
const upfront = 1 << 20

// readSection reads a section of n bytes.
func readSection(r io.Reader, n uint32) ([]byte, error) {
	if n <= upfront {
		b := make([]byte, n)
		populate(b)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, unexpected(err)
		}
		return b, nil
	}
	b := make([]byte, 0, upfront)
	for uint32(len(b)) < n {
		if len(b) == cap(b) {
			// Doubling: what is copied stays below n in all.
			nb := make([]byte, len(b), min(2*cap(b), int(n)))
			copy(nb, b)
			b = nb
		}
		m, err := io.ReadFull(r, b[len(b):cap(b)])
		b = b[:len(b)+m]
		if err != nil {
			return nil, unexpected(err)
		}
	}
	return b, nil
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
