package sim

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
)

// Format names a trace file format.
type Format string

const (
	// FormatCoopfs is coopfs's text format: one access a line,
	// "TIME CLIENT FILE BLOCK OP", TIME in seconds (decimal), CLIENT, FILE
	// and BLOCK non-negative integers, OP one of read, write, open, close,
	// delete. For open and delete BLOCK is the file's length in blocks.
	// Blank lines and lines starting with '#' are skipped.
	FormatCoopfs Format = "coopfs"
	// FormatLIRS is the public block traces' format: one block number a
	// line, '*' lines (checkpoints) skipped. Every access is a read by
	// client 0 of file 0; access i happens at virtual time i × LIRSInterval.
	FormatLIRS Format = "lirs"
	// FormatTxt is libCacheSim's txt format: one numeric object id a line,
	// read like FormatLIRS.
	FormatTxt Format = "txt"
	// FormatOracle is libCacheSim's oracleGeneral binary format: 24-byte
	// little-endian records (uint32 time in seconds, uint64 object id,
	// uint32 object size in bytes, int64 next access vtime). An object is
	// file ObjectID, block 0, of Size bytes, read by client 0.
	FormatOracle Format = "oracleGeneral"
	// FormatCSV is libCacheSim's csv format: delimited text with the
	// columns a CSVSpec names (time, object id, size, op, client).
	FormatCSV Format = "csv"
	// FormatOracleNS is libCacheSim's oracleGeneralOpNS binary format:
	// 27-byte records (uint32 time, uint64 object id, uint32 size, uint8
	// operation, uint16 namespace, int64 next access). The namespace is
	// the client: one binary file holds a multi-client trace.
	FormatOracleNS Format = "oracleGeneralOpNS"
)

// Formats lists the trace formats by name.
func Formats() []Format {
	return []Format{FormatCoopfs, FormatLIRS, FormatTxt, FormatOracle, FormatOracleNS, FormatCSV}
}

// Sized reports whether the format's accesses carry object sizes.
func (f Format) Sized() bool { return f == FormatOracle || f == FormatOracleNS || f == FormatCSV }

// LIRSInterval is the virtual time between two accesses of a LIRS trace.
const LIRSInterval = time.Millisecond

// ParseFormat checks a format name (case does not matter; "oracle" is
// short for oracleGeneral).
func ParseFormat(s string) (Format, error) {
	switch strings.ToLower(s) {
	case "coopfs":
		return FormatCoopfs, nil
	case "lirs":
		return FormatLIRS, nil
	case "txt":
		return FormatTxt, nil
	case "oraclegeneral", "oracle":
		return FormatOracle, nil
	case "oraclegeneralopns", "oraclens":
		return FormatOracleNS, nil
	case "csv":
		return FormatCSV, nil
	}
	return "", fmt.Errorf("unknown trace format %q: want coopfs, lirs, txt, oracleGeneral, oracleGeneralOpNS or csv", s)
}

// maxLine bounds a trace line; longer lines are an error, not a crash.
const maxLine = 4096

// ReadOptions say how to read a trace.
type ReadOptions struct {
	Format Format
	// CSV gives the columns of a FormatCSV trace (zero: DefaultCSVSpec).
	CSV CSVSpec
	// Sizes says what to do with object sizes (FormatOracle, FormatCSV
	// with a size column); the zero value is SizesKeep.
	Sizes SizeMode
	// BlockSize is the block size for SizesBlocks.
	BlockSize int64
}

// SizeMode is what a reader does with the object sizes a trace carries.
type SizeMode string

const (
	// SizesKeep passes sizes on in Access.Size (converters).
	SizesKeep SizeMode = ""
	// SizesBlocks honours sizes: an access to an object of S bytes becomes
	// accesses to its ceil(S/BlockSize) blocks (at least one), in order,
	// so caches sized in bytes hold objects by their size.
	SizesBlocks SizeMode = "blocks"
	// SizesIgnore treats every object as one block (libCacheSim's
	// --ignore-obj-size): caches are sized in objects.
	SizesIgnore SizeMode = "ignore"
)

// ParseSizeMode checks a --sizes value.
func ParseSizeMode(s string) (SizeMode, error) {
	switch SizeMode(s) {
	case SizesBlocks, SizesIgnore:
		return SizeMode(s), nil
	}
	return "", fmt.Errorf("unknown --sizes %q: want blocks or ignore", s)
}

// NewReader returns a Source reading a trace in format f from r. Gzip and
// zstd input are detected by their magic numbers and decompressed
// transparently. Object sizes are kept in Access.Size.
func NewReader(r io.Reader, f Format) (Source, error) {
	return NewReaderOptions(r, ReadOptions{Format: f})
}

// NewReaderOptions is NewReader with every option.
func NewReaderOptions(r io.Reader, o ReadOptions) (Source, error) {
	br, closer, err := decompress(r)
	if err != nil {
		return nil, err
	}
	src, err := newFormatReader(br, o)
	if err != nil {
		if closer != nil {
			closer.Close()
		}
		return nil, err
	}
	if closer != nil {
		src = &closingSource{Source: src, c: closer}
	}
	return src, nil
}

// newFormatReader is the reader of o.Format over br, with o's size mode.
func newFormatReader(br *bufio.Reader, o ReadOptions) (Source, error) {
	var src Source
	switch o.Format {
	case FormatCoopfs:
		src = &coopfsReader{lr: newLineReader(br)}
	case FormatLIRS, FormatTxt:
		src = &lirsReader{lr: newLineReader(br)}
	case FormatOracle, FormatOracleNS:
		src = newOracleReader(br, o.Format == FormatOracleNS)
	case FormatCSV:
		spec := o.CSV
		if spec == (CSVSpec{}) {
			spec = DefaultCSVSpec()
		}
		if err := spec.validate(); err != nil {
			return nil, err
		}
		src = newCSVReader(newLineReader(br), spec)
	default:
		return nil, fmt.Errorf("unknown trace format %q: want coopfs, lirs, txt, oracleGeneral, oracleGeneralOpNS or csv", o.Format)
	}
	// Only object formats carry sizes; the others' accesses are blocks.
	sized := o.Format.Sized()
	switch o.Sizes {
	case SizesKeep:
	case SizesIgnore:
		if sized {
			src = &sizeDropper{Source: src}
		}
	case SizesBlocks:
		if o.BlockSize < 1 {
			return nil, fmt.Errorf("block size %d: want at least 1 byte", o.BlockSize)
		}
		if sized {
			src = &blockExpander{Source: src, bs: uint64(o.BlockSize)}
		}
	default:
		return nil, fmt.Errorf("unknown size mode %q: want blocks or ignore", o.Sizes)
	}
	return src, nil
}

// decompress detects gzip and zstd input by their magic numbers.
func decompress(r io.Reader) (*bufio.Reader, io.Closer, error) {
	br := bufio.NewReaderSize(r, 256<<10)
	magic, _ := br.Peek(4)
	switch {
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, fmt.Errorf("gzip trace: %w", err)
		}
		return bufio.NewReaderSize(zr, 256<<10), zr, nil
	case len(magic) == 4 && magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f && magic[3] == 0xfd:
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(1<<30))
		if err != nil {
			return nil, nil, fmt.Errorf("zstd trace: %w", err)
		}
		return bufio.NewReaderSize(zr, 256<<10), zstdCloser{zr}, nil
	}
	return br, nil, nil
}

type zstdCloser struct{ d *zstd.Decoder }

func (z zstdCloser) Close() error { z.d.Close(); return nil }

type closingSource struct {
	Source
	c io.Closer
}

func (s *closingSource) NextBatch(dst []Access) (int, error) { return FillBatch(s.Source, dst) }

func (s *closingSource) Close() error {
	err := s.c.Close()
	if e := CloseSource(s.Source); err == nil {
		err = e
	}
	return err
}

type lirsReader struct {
	lr *lineReader
	n  int64
}

func (l *lirsReader) NextBatch(dst []Access) (int, error) { return fastBatch(dst, l.fast, l.Next) }

// fast parses the lines of plain digits (at most 18, then \n) already in
// the read buffer, in one pass over the bytes, and returns how many it
// filled; it stops at anything else (a '*' line, blanks, \r, a line not
// wholly buffered), which Next handles.
func (l *lirsReader) fast(dst []Access) int {
	br := l.lr.br
	if br.Buffered() == 0 {
		return 0
	}
	buf, _ := br.Peek(br.Buffered())
	n, pos := 0, 0
	for n < len(dst) {
		var v uint64
		j := pos
		for j < len(buf) && j-pos <= 18 {
			c := buf[j] - '0'
			if c > 9 {
				break
			}
			v = v*10 + uint64(c)
			j++
		}
		if j == pos || j-pos > 18 || j >= len(buf) || buf[j] != '\n' {
			break
		}
		dst[n] = Access{Time: time.Duration(l.n) * LIRSInterval, Block: v, Op: OpRead}
		l.n++
		n++
		pos = j + 1
	}
	br.Discard(pos)
	l.lr.line += n
	return n
}

func (l *lirsReader) Next() (Access, error) {
	for {
		s, err := l.lr.next()
		if err != nil {
			return Access{}, err
		}
		if len(s) == 0 || s[0] == '*' {
			continue
		}
		b, ok := parseUint(s, 63)
		if !ok {
			return Access{}, fmt.Errorf("line %d: %q is not a block number", l.lr.line, s)
		}
		a := Access{Time: time.Duration(l.n) * LIRSInterval, Block: b, Op: OpRead}
		l.n++
		return a, nil
	}
}

type coopfsReader struct {
	lr *lineReader
	f  [5][]byte
}

func (c *coopfsReader) NextBatch(dst []Access) (int, error) { return fastBatch(dst, c.fast, c.Next) }

// fast parses the lines already in the read buffer that parseCoopfsFast
// takes (no blanks around them, no comments) straight from the buffer, and
// returns how many it filled; it stops at any other line, which Next
// handles.
func (c *coopfsReader) fast(dst []Access) int {
	br := c.lr.br
	if br.Buffered() == 0 {
		return 0
	}
	buf, _ := br.Peek(br.Buffered())
	n, pos := 0, 0
	for n < len(dst) {
		j := bytes.IndexByte(buf[pos:], '\n')
		if j <= 0 {
			break
		}
		s := buf[pos : pos+j]
		if isSpace(s[0]) || isSpace(s[len(s)-1]) {
			break
		}
		a, ok := parseCoopfsFast(s)
		if !ok {
			break
		}
		dst[n] = a
		n++
		pos += j + 1
	}
	br.Discard(pos)
	c.lr.line += n
	return n
}

func (c *coopfsReader) Next() (Access, error) {
	for {
		s, err := c.lr.next()
		if err != nil {
			return Access{}, err
		}
		if len(s) == 0 || s[0] == '#' {
			continue
		}
		a, err := c.parse(s)
		if err != nil {
			return Access{}, fmt.Errorf("line %d: %w", c.lr.line, err)
		}
		return a, nil
	}
}

func (c *coopfsReader) parse(s []byte) (Access, error) {
	if a, ok := parseCoopfsFast(s); ok {
		return a, nil
	}
	return c.parseSlow(s)
}

// parseCoopfsFast parses the usual coopfs line in one pass: plain decimal
// time (at most 15 digits), integers, a known operation, single blanks or
// tabs between the fields, no blanks around the line (lineReader trims
// them). It gives what parseSlow gives; anything else, including every
// error, is left to parseSlow (ok false).
func parseCoopfsFast(s []byte) (Access, bool) {
	i := 0
	// Time: digits, an optional fraction.
	var m uint64
	digits, frac, dot := 0, 0, false
	for ; i < len(s); i++ {
		ch := s[i]
		if ch >= '0' && ch <= '9' {
			m = m*10 + uint64(ch-'0')
			digits++
			if dot {
				frac++
			}
			continue
		}
		if ch == '.' && !dot {
			dot = true
			continue
		}
		break
	}
	if digits == 0 || digits > 15 {
		return Access{}, false
	}
	sec := float64(m) / pow10[frac]
	if sec > 1e9 {
		return Access{}, false
	}
	var v [3]uint64
	for f := range v {
		if i >= len(s) || (s[i] != ' ' && s[i] != '\t') {
			return Access{}, false
		}
		i++
		j := i
		var x uint64
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			x = x*10 + uint64(s[i]-'0')
		}
		if i == j || i-j > 19 {
			return Access{}, false
		}
		v[f] = x
	}
	if v[0] >= 1<<31 || i >= len(s) || (s[i] != ' ' && s[i] != '\t') {
		return Access{}, false
	}
	var op Op
	switch string(s[i+1:]) {
	case "read", "r", "R":
		op = OpRead
	case "write", "w", "W":
		op = OpWrite
	case "open", "o":
		op = OpOpen
	case "close", "c":
		op = OpClose
	case "delete", "d":
		op = OpDelete
	default:
		return Access{}, false
	}
	return Access{Time: secondsToDuration(sec), Client: int(v[0]), File: v[1], Block: v[2], Op: op}, true
}

func (c *coopfsReader) parseSlow(s []byte) (Access, error) {
	f, n := fields(s, c.f[:0])
	if n != 5 {
		return Access{}, fmt.Errorf("want 5 fields \"time client file block op\", got %d", n)
	}
	sec, ok := parseSeconds(f[0])
	if !ok || sec < 0 || sec > 1e9 || sec != sec {
		return Access{}, fmt.Errorf("bad time %q: want seconds >= 0", f[0])
	}
	cl, ok := parseUint(f[1], 31)
	if !ok {
		return Access{}, fmt.Errorf("bad client %q: want an integer >= 0", f[1])
	}
	file, ok := parseUint(f[2], 64)
	if !ok {
		return Access{}, fmt.Errorf("bad file %q: want an integer >= 0", f[2])
	}
	blk, ok := parseUint(f[3], 64)
	if !ok {
		return Access{}, fmt.Errorf("bad block %q: want an integer >= 0", f[3])
	}
	op, err := parseOpBytes(f[4])
	if err != nil {
		return Access{}, err
	}
	return Access{Time: secondsToDuration(sec), Client: int(cl), File: file, Block: blk, Op: op}, nil
}

// parseOpBytes is ParseOp without allocating for the usual names.
func parseOpBytes(b []byte) (Op, error) {
	switch string(b) { // no allocation: the compiler compares in place
	case "read", "r", "R":
		return OpRead, nil
	case "write", "w", "W":
		return OpWrite, nil
	case "open", "o":
		return OpOpen, nil
	case "close", "c":
		return OpClose, nil
	case "delete", "d":
		return OpDelete, nil
	}
	return ParseOp(string(b))
}

// FormatAccess writes a in the coopfs text format (without newline).
func FormatAccess(a Access) string {
	return strconv.FormatFloat(a.Time.Seconds(), 'f', -1, 64) + " " + strconv.Itoa(a.Client) + " " +
		strconv.FormatUint(a.File, 10) + " " + strconv.FormatUint(a.Block, 10) + " " + a.Op.String()
}

// WriteTrace writes every access of w to out in the coopfs text format.
func WriteTrace(out io.Writer, w Workload) error {
	bw := bufio.NewWriterSize(out, 64<<10)
	fmt.Fprintf(bw, "# coopfs trace: %s\n# time(s) client file block op\n", w.Name())
	var werr error
	err := ForEach(w, func(a Access) {
		if werr == nil {
			_, werr = bw.WriteString(FormatAccess(a) + "\n")
		}
	})
	if err != nil {
		return err
	}
	if werr != nil {
		return werr
	}
	return bw.Flush()
}

// File is a trace file replayed as a workload.
type File struct {
	Path   string
	Format Format
	// Options are the other read options (Options.Format is ignored:
	// Format wins).
	Options ReadOptions
}

// Name implements Workload.
func (f *File) Name() string { return f.Path }

// Open implements Workload.
func (f *File) Open() (Source, error) {
	fh, err := os.Open(f.Path)
	if err != nil {
		return nil, err
	}
	o := f.Options
	o.Format = f.Format
	src, err := NewReaderOptions(fh, o)
	if err != nil {
		fh.Close()
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	return &fileSource{Source: src, f: fh, path: f.Path}, nil
}

type fileSource struct {
	Source
	f    *os.File
	path string
}

func (s *fileSource) NextBatch(dst []Access) (int, error) {
	n, err := FillBatch(s.Source, dst)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("%s: %w", s.path, err)
	}
	return n, err
}

func (s *fileSource) Next() (Access, error) {
	a, err := s.Source.Next()
	if err != nil && err != io.EOF {
		err = fmt.Errorf("%s: %w", s.path, err)
	}
	return a, err
}

// ReadAhead implements ReadAheader: a file does not depend on the run.
func (s *fileSource) ReadAhead() bool { return true }

func (s *fileSource) Close() error {
	err := CloseSource(s.Source)
	if e := s.f.Close(); err == nil {
		err = e
	}
	return err
}
