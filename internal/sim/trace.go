package sim

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
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
)

// LIRSInterval is the virtual time between two accesses of a LIRS trace.
const LIRSInterval = time.Millisecond

// ParseFormat checks a format name.
func ParseFormat(s string) (Format, error) {
	switch Format(s) {
	case FormatCoopfs, FormatLIRS:
		return Format(s), nil
	}
	return "", fmt.Errorf("unknown trace format %q: want coopfs or lirs", s)
}

// maxLine bounds a trace line; longer lines are an error, not a crash.
const maxLine = 4096

// NewReader returns a Source reading a trace in format f from r. Gzip input
// is detected by its magic number and decompressed transparently.
func NewReader(r io.Reader, f Format) (Source, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip trace: %w", err)
		}
		br = bufio.NewReaderSize(zr, 64<<10)
	}
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 0, 512), maxLine)
	switch f {
	case FormatCoopfs:
		return &coopfsReader{sc: sc}, nil
	case FormatLIRS:
		return &lirsReader{sc: sc}, nil
	}
	return nil, fmt.Errorf("unknown trace format %q: want coopfs or lirs", f)
}

type lirsReader struct {
	sc   *bufio.Scanner
	line int
	n    int64
}

func (l *lirsReader) Next() (Access, error) {
	for l.sc.Scan() {
		l.line++
		s := bytes.TrimSpace(l.sc.Bytes())
		if len(s) == 0 || s[0] == '*' {
			continue
		}
		b, err := strconv.ParseUint(string(s), 10, 63)
		if err != nil {
			return Access{}, fmt.Errorf("line %d: %q is not a block number", l.line, s)
		}
		a := Access{Time: time.Duration(l.n) * LIRSInterval, Block: b, Op: OpRead}
		l.n++
		return a, nil
	}
	return Access{}, scanErr(l.sc, l.line)
}

func scanErr(sc *bufio.Scanner, line int) error {
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("line %d: longer than %d bytes", line+1, maxLine)
		}
		return err
	}
	return io.EOF
}

type coopfsReader struct {
	sc   *bufio.Scanner
	line int
}

func (c *coopfsReader) Next() (Access, error) {
	for c.sc.Scan() {
		c.line++
		s := strings.TrimSpace(c.sc.Text())
		if s == "" || s[0] == '#' {
			continue
		}
		a, err := parseCoopfsLine(s)
		if err != nil {
			return Access{}, fmt.Errorf("line %d: %w", c.line, err)
		}
		return a, nil
	}
	return Access{}, scanErr(c.sc, c.line)
}

func parseCoopfsLine(s string) (Access, error) {
	f := strings.Fields(s)
	if len(f) != 5 {
		return Access{}, fmt.Errorf("want 5 fields \"time client file block op\", got %d", len(f))
	}
	sec, err := strconv.ParseFloat(f[0], 64)
	if err != nil || sec < 0 || sec > 1e9 || sec != sec {
		return Access{}, fmt.Errorf("bad time %q: want seconds >= 0", f[0])
	}
	cl, err := strconv.ParseUint(f[1], 10, 31)
	if err != nil {
		return Access{}, fmt.Errorf("bad client %q: want an integer >= 0", f[1])
	}
	file, err := strconv.ParseUint(f[2], 10, 64)
	if err != nil {
		return Access{}, fmt.Errorf("bad file %q: want an integer >= 0", f[2])
	}
	blk, err := strconv.ParseUint(f[3], 10, 64)
	if err != nil {
		return Access{}, fmt.Errorf("bad block %q: want an integer >= 0", f[3])
	}
	op, err := ParseOp(f[4])
	if err != nil {
		return Access{}, err
	}
	return Access{Time: time.Duration(sec * 1e9), Client: int(cl), File: file, Block: blk, Op: op}, nil
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
}

// Name implements Workload.
func (f *File) Name() string { return f.Path }

// Open implements Workload.
func (f *File) Open() (Source, error) {
	fh, err := os.Open(f.Path)
	if err != nil {
		return nil, err
	}
	src, err := NewReader(fh, f.Format)
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

func (s *fileSource) Next() (Access, error) {
	a, err := s.Source.Next()
	if err != nil && err != io.EOF {
		err = fmt.Errorf("%s: %w", s.path, err)
	}
	return a, err
}

func (s *fileSource) Close() error { return s.f.Close() }
