package sim

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// OracleRecordSize is the size of one oracleGeneral record;
// OracleNSRecordSize of one oracleGeneralOpNS record.
const (
	OracleRecordSize   = 24
	OracleNSRecordSize = 27
)

// oracleReader reads libCacheSim's oracleGeneral records, or with ns its
// oracleGeneralOpNS records (an operation and a namespace, the client,
// before the next access). The next-access field (1-based position of the
// object's next record, -1 or math.MaxInt64 if none) is checked (>= -1)
// and passed on in Access.Next, math.MaxInt64 as -1.
type oracleReader struct {
	r    *bufio.Reader
	ns   bool
	size int // record size
	n    int64
}

func newOracleReader(r *bufio.Reader, ns bool) *oracleReader {
	o := &oracleReader{r: r, ns: ns, size: OracleRecordSize}
	if ns {
		o.size = OracleNSRecordSize
	}
	return o
}

func (o *oracleReader) NextBatch(dst []Access) (int, error) { return fastBatch(dst, o.fast, o.Next) }

// fast decodes the whole records already in the read buffer and returns
// how many it filled; it stops before a bad record, which Next reports.
func (o *oracleReader) fast(dst []Access) int {
	k := min(o.r.Buffered()/o.size, len(dst))
	if k == 0 {
		return 0
	}
	b, _ := o.r.Peek(k * o.size)
	n := o.decode(dst[:k], b)
	o.r.Discard(n * o.size)
	o.n += int64(n)
	return n
}

// decodeOracle fills dst from the oracleGeneral records in b, each
// written straight into its place, and returns how many it filled: it
// stops at a record whose next access is out of range.
func decodeOracle(dst []Access, b []byte) int {
	for i := range dst {
		r := b[i*OracleRecordSize:][:OracleRecordSize]
		next, ok := oracleNext(r[16:])
		if !ok {
			return i
		}
		dst[i] = Access{Time: time.Duration(binary.LittleEndian.Uint32(r)) * time.Second,
			File: binary.LittleEndian.Uint64(r[4:]), Size: binary.LittleEndian.Uint32(r[12:]), Next: next}
	}
	return len(dst)
}

// decodeOracleNS is decodeOracle for oracleGeneralOpNS records; it also
// stops at an unknown operation.
func decodeOracleNS(dst []Access, b []byte) int {
	for i := range dst {
		r := b[i*OracleNSRecordSize:][:OracleNSRecordSize]
		next, ok := oracleNext(r[19:])
		op, known := lcsOp(r[16])
		if !ok || !known {
			return i
		}
		dst[i] = Access{Time: time.Duration(binary.LittleEndian.Uint32(r)) * time.Second,
			Client: int(binary.LittleEndian.Uint16(r[17:])), File: binary.LittleEndian.Uint64(r[4:]), Op: op,
			Size: binary.LittleEndian.Uint32(r[12:]), Next: next}
	}
	return len(dst)
}

// oracleNext reads a next-access field: libCacheSim's "none", -1 or
// math.MaxInt64, is -1; ok is false for a field below -1.
func oracleNext(b []byte) (next int64, ok bool) {
	next = int64(binary.LittleEndian.Uint64(b))
	if next == math.MaxInt64 {
		next = -1
	}
	return next, next >= -1
}

// decode fills dst from the records in b (decodeOracle, decodeOracleNS).
func (o *oracleReader) decode(dst []Access, b []byte) int {
	if o.ns {
		return decodeOracleNS(dst, b)
	}
	return decodeOracle(dst, b)
}

// lcsOp maps libCacheSim's operation codes (req_op_e): nop, get, gets and
// read are reads (libCacheSim's simulator treats a nop as a request too);
// set, add, cas, replace, append, prepend, incr, decr, write and update
// are writes; delete deletes.
func lcsOp(c byte) (Op, bool) {
	switch c {
	case 0, 1, 2, 12:
		return OpRead, true
	case 3, 4, 5, 6, 7, 8, 10, 11, 13, 14:
		return OpWrite, true
	case 9:
		return OpDelete, true
	}
	return 0, false
}

// lcsOpCode is the libCacheSim operation code a converter writes for op:
// get, set or delete.
func lcsOpCode(op Op) byte {
	switch op {
	case OpWrite:
		return 3
	case OpDelete:
		return 9
	}
	return 1
}

func (o *oracleReader) Next() (Access, error) {
	b, err := o.r.Peek(o.size)
	name := "oracleGeneral"
	if o.ns {
		name = "oracleGeneralOpNS"
	}
	if len(b) < o.size {
		if len(b) == 0 && (err == io.EOF || err == nil) {
			return Access{}, io.EOF
		}
		if err != nil && err != io.EOF {
			return Access{}, err
		}
		return Access{}, fmt.Errorf("record %d: truncated (%d of %d bytes): not an %s trace?", o.n+1, len(b), o.size, name)
	}
	var a [1]Access
	ok := o.decode(a[:], b) == 1
	o.r.Discard(o.size)
	o.n++
	if !ok {
		if o.ns {
			if _, known := lcsOp(b[16]); !known {
				return Access{}, fmt.Errorf("record %d: operation %d unknown: not an %s trace?", o.n, b[16], name)
			}
		}
		return Access{}, fmt.Errorf("record %d: next access %d: not an %s trace?", o.n, int64(binary.LittleEndian.Uint64(b[o.size-8:])), name)
	}
	return a[0], nil
}

// CSVSpec names the columns of a csv trace, numbered from 1 (0: absent),
// with libCacheSim's option names: "time-col=1,obj-id-col=2,
// obj-size-col=3,op-col=4,client-col=5,delimiter=comma,has-header=true,
// obj-id-is-num=true". Only the object id column is required.
type CSVSpec struct {
	TimeCol, IDCol, SizeCol, OpCol, ClientCol int
	// Delim separates fields (one byte).
	Delim byte
	// Header says the first line names the columns (it is skipped).
	Header bool
	// HashIDs hashes object ids (FNV-1a 64) instead of parsing them as
	// integers (libCacheSim's obj-id-is-num=false).
	HashIDs bool
	// TimeScale multiplies the time column to get seconds (0: 1; e.g.
	// 1e-6 for microsecond timestamps).
	TimeScale float64
}

// DefaultCSVSpec is the layout `coopfs sim convert --to csv` writes:
// time,obj_id,obj_size,op,client with a header.
func DefaultCSVSpec() CSVSpec {
	return CSVSpec{TimeCol: 1, IDCol: 2, SizeCol: 3, OpCol: 4, ClientCol: 5, Delim: ',', Header: true}
}

// ParseCSVSpec parses the comma-separated key=value form. Delimiters are
// named (comma, tab, space, semicolon, pipe) or given as one other byte.
func ParseCSVSpec(s string) (CSVSpec, error) {
	c := CSVSpec{Delim: ','}
	if strings.TrimSpace(s) == "" {
		return DefaultCSVSpec(), nil
	}
	for kv := range strings.SplitSeq(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return c, fmt.Errorf("csv spec %q: %q is not key=value", s, kv)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		col := func(dst *int) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 64 {
				return fmt.Errorf("csv spec: %s=%q: want a column number 1..64", k, v)
			}
			*dst = n
			return nil
		}
		var err error
		switch k {
		case "time-col":
			err = col(&c.TimeCol)
		case "obj-id-col", "id-col":
			err = col(&c.IDCol)
		case "obj-size-col", "size-col":
			err = col(&c.SizeCol)
		case "op-col":
			err = col(&c.OpCol)
		case "client-col":
			err = col(&c.ClientCol)
		case "delimiter":
			c.Delim, err = parseDelim(v)
		case "has-header", "header":
			c.Header, err = strconv.ParseBool(v)
		case "obj-id-is-num":
			var num bool
			num, err = strconv.ParseBool(v)
			c.HashIDs = !num
		case "time-scale":
			c.TimeScale, err = strconv.ParseFloat(v, 64)
			if err == nil && !(c.TimeScale > 0) {
				err = errors.New("want > 0")
			}
		default:
			return c, fmt.Errorf("csv spec: unknown key %q: want time-col, obj-id-col, obj-size-col, op-col, client-col, delimiter, has-header, obj-id-is-num or time-scale", k)
		}
		if err != nil {
			return c, fmt.Errorf("csv spec: %s=%q: %w", k, v, err)
		}
	}
	return c, c.validate()
}

func parseDelim(v string) (byte, error) {
	switch v {
	case "comma", "":
		return ',', nil
	case "tab", `\t`:
		return '\t', nil
	case "space":
		return ' ', nil
	case "semicolon":
		return ';', nil
	case "pipe":
		return '|', nil
	}
	if len(v) == 1 && v[0] != '\n' && v[0] != '"' {
		return v[0], nil
	}
	return 0, errors.New("want comma, tab, space, semicolon, pipe or one byte")
}

func (c CSVSpec) validate() error {
	if c.IDCol < 1 {
		return errors.New("csv spec: obj-id-col is required")
	}
	if c.Delim == 0 || c.Delim == '\n' {
		return errors.New("csv spec: bad delimiter")
	}
	seen := map[int]string{}
	for _, col := range []struct {
		n    int
		name string
	}{{c.TimeCol, "time-col"}, {c.IDCol, "obj-id-col"}, {c.SizeCol, "obj-size-col"}, {c.OpCol, "op-col"}, {c.ClientCol, "client-col"}} {
		if col.n < 0 || col.n > 64 {
			return fmt.Errorf("csv spec: %s=%d: want 1..64", col.name, col.n)
		}
		if col.n == 0 {
			continue
		}
		if o, dup := seen[col.n]; dup {
			return fmt.Errorf("csv spec: %s and %s are both column %d", o, col.name, col.n)
		}
		seen[col.n] = col.name
	}
	return nil
}

// csvReader reads delimited text. Fields may be wrapped in double quotes
// (no delimiters or quotes inside them). Without a time column, access i
// happens at i × LIRSInterval.
type csvReader struct {
	lr     *lineReader
	spec   CSVSpec
	header bool
	n      int64
	f      [64][]byte
	// roles[col] is what column col (from 1) holds, for parseFast; last
	// is the last column it needs. fastOK: the delimiter cannot be part
	// of a number (parseFast reads numbers up to the first other byte).
	roles  [65]csvRole
	last   int
	fastOK bool
}

// csvRole is what a csv column holds.
type csvRole uint8

const (
	csvNone csvRole = iota
	csvID
	csvTime
	csvSize
	csvOp
	csvClient
)

func newCSVReader(lr *lineReader, spec CSVSpec) *csvReader {
	c := &csvReader{lr: lr, spec: spec, header: spec.Header,
		fastOK: !(spec.Delim >= '0' && spec.Delim <= '9' || spec.Delim == '.')}
	for _, col := range []struct {
		n    int
		role csvRole
	}{{spec.IDCol, csvID}, {spec.TimeCol, csvTime}, {spec.SizeCol, csvSize}, {spec.OpCol, csvOp}, {spec.ClientCol, csvClient}} {
		if col.n > 0 {
			c.roles[col.n] = col.role
			c.last = max(c.last, col.n)
		}
	}
	return c
}

func (c *csvReader) NextBatch(dst []Access) (int, error) { return fastBatch(dst, c.fast, c.Next) }

// fast parses the data lines already in the read buffer straight from it
// and returns how many it filled; it stops at the header, a blank or
// comment line, a line not wholly buffered or one that does not parse,
// which Next handles.
func (c *csvReader) fast(dst []Access) int {
	br := c.lr.br
	if c.header || br.Buffered() == 0 || !c.fastOK {
		return 0
	}
	buf, _ := br.Peek(br.Buffered())
	n, pos := 0, 0
	for n < len(dst) {
		if a, j, ok := c.parseFast(buf[pos:]); ok {
			dst[n] = a
			c.n++
			n++
			pos += j + 1
			continue
		}
		j := bytes.IndexByte(buf[pos:], '\n')
		if j < 0 || j > maxLine {
			break
		}
		s := trimSpace(buf[pos : pos+j])
		if len(s) == 0 || s[0] == '#' {
			break
		}
		a, err := c.parse(s)
		if err != nil {
			break
		}
		dst[n] = a
		c.n++
		n++
		pos += j + 1
	}
	br.Discard(pos)
	c.lr.line += n
	return n
}

// parseFast parses the plain line at the start of buf in one pass over
// its bytes, the columns it needs only, without splitting it — numbers are
// accumulated as their digits go by — and returns where the line's '\n'
// is. It gives up (ok false) on anything else — quotes, blanks around a
// field, '\r', a missing column, a value that does not parse, a line not
// wholly in buf — which the line parser handles (with the same result, or
// the error).
func (c *csvReader) parseFast(buf []byte) (a Access, end int, ok bool) {
	if len(buf) == 0 || buf[0] == '#' { // a comment: the line parser skips it
		return a, 0, false
	}
	a = Access{Op: OpRead, Time: time.Duration(c.n) * LIRSInterval}
	d := c.spec.Delim
	i := 0
	for col := 1; ; col++ {
		switch r := c.roles[col]; {
		case r == csvTime:
			var m uint64
			digits, frac, dot := 0, 0, false
			for ; i < len(buf); i++ {
				if x := buf[i] - '0'; x <= 9 {
					m = m*10 + uint64(x)
					digits++
					if dot {
						frac++
					}
				} else if buf[i] == '.' && !dot {
					dot = true
				} else {
					break
				}
			}
			if digits == 0 || digits > 15 {
				return a, 0, false
			}
			sec := float64(m) / pow10[frac] // as parseSeconds
			if c.spec.TimeScale > 0 {
				sec *= c.spec.TimeScale
			}
			if sec < 0 || sec > 1e9 {
				return a, 0, false
			}
			a.Time = secondsToDuration(sec)
		case r == csvSize || r == csvClient || r == csvID && !c.spec.HashIDs:
			var v uint64
			j := i
			for ; i < len(buf); i++ {
				x := buf[i] - '0'
				if x > 9 {
					break
				}
				v = v*10 + uint64(x)
			}
			switch n := i - j; {
			case n == 0 || n > 19: // 20 digits may overflow: the line parser checks
				return a, 0, false
			case r == csvSize:
				if v >= 1<<32 {
					return a, 0, false
				}
				a.Size = uint32(v)
			case r == csvClient:
				if v >= 1<<31 {
					return a, 0, false
				}
				a.Client = int(v)
			default:
				a.File = v
			}
		default:
			j := i
			for i < len(buf) && buf[i] != d && buf[i] != '\n' {
				i++
			}
			if r != csvNone && i < len(buf) && !c.fastField(&a, r, buf[j:i]) {
				return a, 0, false
			}
		}
		if i >= len(buf) {
			return a, 0, false // not wholly buffered
		}
		if col == c.last {
			if buf[i] != '\n' {
				if buf[i] != d {
					return a, 0, false
				}
				k := bytes.IndexByte(buf[i:], '\n')
				if k < 0 {
					return a, 0, false
				}
				i += k
			}
			if i > maxLine || (i > 0 && buf[i-1] == '\r') {
				return a, 0, false
			}
			return a, i, true
		}
		if buf[i] != d {
			return a, 0, false // a column is missing, or a value does not parse
		}
		i++
	}
}

// fastField parses v, column role r of a plain line, into a.
func (c *csvReader) fastField(a *Access, r csvRole, v []byte) bool {
	switch r {
	case csvID:
		if c.spec.HashIDs {
			if len(v) == 0 || v[0] == '"' || isSpace(v[0]) || isSpace(v[len(v)-1]) {
				return false
			}
			h := fnv.New64a()
			h.Write(v)
			a.File = h.Sum64()
			return true
		}
		id, ok := parseUint(v, 64)
		a.File = id
		return ok
	case csvTime:
		sec, ok := parseSeconds(v)
		if c.spec.TimeScale > 0 {
			sec *= c.spec.TimeScale
		}
		if !ok || sec < 0 || sec > 1e9 || sec != sec {
			return false
		}
		a.Time = secondsToDuration(sec)
	case csvSize:
		n, ok := parseUint(v, 32)
		a.Size = uint32(n)
		return ok
	case csvOp:
		switch string(v) {
		case "read", "get":
			a.Op = OpRead
		case "write", "set":
			a.Op = OpWrite
		case "open":
			a.Op = OpOpen
		case "close":
			a.Op = OpClose
		case "delete":
			a.Op = OpDelete
		default:
			return false
		}
	case csvClient:
		n, ok := parseUint(v, 31)
		a.Client = int(n)
		return ok
	}
	return true
}

func (c *csvReader) Next() (Access, error) {
	for {
		s, err := c.lr.next()
		if err != nil {
			return Access{}, err
		}
		if len(s) == 0 || s[0] == '#' {
			continue
		}
		if c.header {
			c.header = false
			continue
		}
		a, err := c.parse(s)
		if err != nil {
			return Access{}, fmt.Errorf("line %d: %w", c.lr.line, err)
		}
		c.n++
		return a, nil
	}
}

func (c *csvReader) split(s []byte) [][]byte {
	f := c.f[:0]
	for len(f) < cap(f) {
		i := 0
		for i < len(s) && s[i] != c.spec.Delim {
			i++
		}
		v := s[:i]
		if len(v) > 0 && (isSpace(v[0]) || isSpace(v[len(v)-1])) {
			v = trimSpace(v)
		}
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
			v = v[1 : len(v)-1]
		}
		f = append(f, v)
		if i == len(s) {
			break
		}
		s = s[i+1:]
	}
	return f
}

func (c *csvReader) parse(s []byte) (Access, error) {
	f := c.split(s)
	col := func(n int, name string) ([]byte, error) {
		if n > len(f) {
			return nil, fmt.Errorf("no %s column %d (the line has %d fields)", name, n, len(f))
		}
		return f[n-1], nil
	}
	a := Access{Op: OpRead, Time: time.Duration(c.n) * LIRSInterval}
	v, err := col(c.spec.IDCol, "object id")
	if err != nil {
		return a, err
	}
	if c.spec.HashIDs {
		h := fnv.New64a()
		h.Write(v)
		a.File = h.Sum64()
	} else if id, ok := parseUint(v, 64); ok {
		a.File = id
	} else {
		return a, fmt.Errorf("object id %q is not a number (set obj-id-is-num=false to hash ids)", v)
	}
	if c.spec.TimeCol > 0 {
		if v, err = col(c.spec.TimeCol, "time"); err != nil {
			return a, err
		}
		sec, ok := parseSeconds(v)
		if c.spec.TimeScale > 0 {
			sec *= c.spec.TimeScale
		}
		if !ok || sec < 0 || sec > 1e9 || sec != sec {
			return a, fmt.Errorf("bad time %q: want a number >= 0 (time-scale converts it to seconds, at most 1e9)", v)
		}
		a.Time = secondsToDuration(sec)
	}
	if c.spec.SizeCol > 0 {
		if v, err = col(c.spec.SizeCol, "size"); err != nil {
			return a, err
		}
		n, ok := parseUint(v, 32)
		if !ok {
			return a, fmt.Errorf("bad size %q: want bytes, 0..4294967295", v)
		}
		a.Size = uint32(n)
	}
	if c.spec.OpCol > 0 {
		if v, err = col(c.spec.OpCol, "op"); err != nil {
			return a, err
		}
		if a.Op, err = parseObjectOp(v); err != nil {
			return a, err
		}
	}
	if c.spec.ClientCol > 0 {
		if v, err = col(c.spec.ClientCol, "client"); err != nil {
			return a, err
		}
		n, ok := parseUint(v, 31)
		if !ok {
			return a, fmt.Errorf("bad client %q: want an integer >= 0", v)
		}
		a.Client = int(n)
	}
	return a, nil
}

// parseObjectOp maps the operations of key-value and block traces: reads
// (read, get, gets), writes (write, set, add, replace, cas, append,
// prepend, incr, decr) and deletes (delete, del), with coopfs's own names.
func parseObjectOp(b []byte) (Op, error) {
	switch string(b) { // the usual spellings, without a copy
	case "read", "get":
		return OpRead, nil
	case "write", "set":
		return OpWrite, nil
	}
	switch strings.ToLower(string(b)) {
	case "read", "r", "get", "gets":
		return OpRead, nil
	case "write", "w", "set", "add", "replace", "cas", "append", "prepend", "incr", "decr":
		return OpWrite, nil
	case "delete", "del", "d":
		return OpDelete, nil
	case "open", "o":
		return OpOpen, nil
	case "close", "c":
		return OpClose, nil
	}
	return 0, fmt.Errorf("unknown operation %q: want read/get, write/set/add/replace/cas/append/prepend/incr/decr or delete", b)
}

// sizeDropper forgets object sizes: one block per object (a delete names
// that one block).
type sizeDropper struct{ Source }

func (s *sizeDropper) Next() (Access, error) {
	a, err := s.Source.Next()
	dropSize(&a)
	return a, err
}

func (s *sizeDropper) NextBatch(dst []Access) (int, error) {
	n, err := FillBatch(s.Source, dst)
	for i := range dst[:n] {
		dropSize(&dst[i])
	}
	return n, err
}

func dropSize(a *Access) {
	if a.Op == OpDelete && a.Size > 0 {
		a.Block = 1
	}
	a.Size = 0
}

// blockExpander turns an access to an object of Size bytes into accesses
// to blocks 0..n-1 of it (n = ceil(Size/bs), at least 1). Accesses without
// a size pass through. A delete names the object's length in blocks. It
// reads its source in batches (the readers' fast paths).
type blockExpander struct {
	Source
	bs   uint64
	cur  Access
	left uint64
	in   []Access // read from Source; in[pos:] not yet expanded
	pos  int
	err  error // what Source reported after in
}

// pull returns the source's next access.
func (e *blockExpander) pull() (Access, error) {
	if e.pos == len(e.in) {
		if e.err != nil {
			return Access{}, e.err
		}
		if e.in == nil {
			e.in = make([]Access, 0, 512)
		}
		n, err := FillBatch(e.Source, e.in[:cap(e.in)])
		e.in, e.pos, e.err = e.in[:n], 0, err
		if n == 0 {
			if err == nil {
				err = io.ErrNoProgress
			}
			e.err = err
			return Access{}, err
		}
	}
	e.pos++
	return e.in[e.pos-1], nil
}

func (e *blockExpander) NextBatch(dst []Access) (int, error) {
	for i := range dst {
		a, err := e.Next()
		if err != nil {
			return i, err
		}
		dst[i] = a
	}
	return len(dst), nil
}

func (e *blockExpander) Next() (Access, error) {
	if e.left > 0 {
		e.cur.Block++
		e.left--
		return e.cur, nil
	}
	a, err := e.pull()
	a.Next = 0 // positions move once an object is several blocks
	if err != nil || a.Size == 0 {
		a.Size = 0
		return a, err
	}
	n := max(1, (uint64(a.Size)+e.bs-1)/e.bs)
	a.Size = 0
	if a.Op == OpDelete || a.Op == OpOpen {
		a.Block = n
		return a, nil
	}
	a.Block = 0
	e.cur, e.left = a, n-1
	return a, nil
}
