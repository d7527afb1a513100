package sim

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"time"
)

// lineReader yields the lines of a text trace without copying them: a line
// is valid until the next call. Lines longer than maxLine are an error.
type lineReader struct {
	br   *bufio.Reader
	line int // number of the line last returned
}

func newLineReader(br *bufio.Reader) *lineReader { return &lineReader{br: br} }

// next returns the next line without its end (\n or \r\n), io.EOF at the end.
func (l *lineReader) next() ([]byte, error) {
	s, err := l.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return nil, fmt.Errorf("line %d: longer than %d bytes", l.line+1, maxLine)
	}
	if err != nil && err != io.EOF {
		return nil, err
	}
	if len(s) == 0 && err == io.EOF {
		return nil, io.EOF
	}
	l.line++
	if len(s) > maxLine+1 {
		return nil, fmt.Errorf("line %d: longer than %d bytes", l.line, maxLine)
	}
	return trimSpace(s), nil
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'
}

func trimSpace(s []byte) []byte {
	for len(s) > 0 && isSpace(s[0]) {
		s = s[1:]
	}
	for len(s) > 0 && isSpace(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

// fields splits s at runs of blanks into out (reused), at most len(out)+1
// fields reported by count: the caller checks the count.
func fields(s []byte, out [][]byte) ([][]byte, int) {
	out = out[:0]
	n := 0
	for i := 0; i < len(s); {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i == len(s) {
			break
		}
		j := i
		for j < len(s) && !isSpace(s[j]) {
			j++
		}
		if len(out) < cap(out) {
			out = append(out, s[i:j])
		}
		n++
		i = j
	}
	return out, n
}

// parseUint parses a decimal integer of at most bits bits, as
// strconv.ParseUint(s, 10, bits) does (no sign, no underscores).
func parseUint(s []byte, bits int) (uint64, bool) {
	if len(s) == 0 || len(s) > 20 {
		return 0, false
	}
	var v uint64
	if len(s) <= 19 { // below 10^19 < 2^64: no overflow check
		for _, c := range s {
			d := uint64(c - '0')
			if d > 9 {
				return 0, false
			}
			v = v*10 + d
		}
		return v, bits >= 64 || v < 1<<uint(bits)
	}
	for _, c := range s {
		d := uint64(c - '0')
		if d > 9 {
			return 0, false
		}
		if v > (math.MaxUint64-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	if bits < 64 && v >= 1<<uint(bits) {
		return 0, false
	}
	return v, true
}

var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15}

// parseSeconds parses a non-negative decimal number of seconds exactly as
// strconv.ParseFloat would (plain digits with an optional fraction take the
// exact fast path: an integer mantissa below 2^53 divided by a power of ten
// is correctly rounded; anything else goes to ParseFloat).
func parseSeconds(s []byte) (float64, bool) {
	var m uint64
	digits, frac, dot := 0, 0, false
	for _, c := range s {
		switch {
		case c >= '0' && c <= '9':
			m = m*10 + uint64(c-'0')
			digits++
			if dot {
				frac++
			}
		case c == '.' && !dot:
			dot = true
		default:
			return parseSecondsSlow(s)
		}
		if digits > 15 {
			return parseSecondsSlow(s)
		}
	}
	if digits == 0 {
		return 0, false
	}
	return float64(m) / pow10[frac], true
}

func parseSecondsSlow(s []byte) (float64, bool) {
	v, err := strconv.ParseFloat(string(s), 64)
	return v, err == nil
}

// secondsToDuration converts trace seconds to a Duration, rounded to the
// nearest nanosecond (so that the times FormatAccess writes read back
// exactly).
func secondsToDuration(sec float64) time.Duration { return time.Duration(math.Round(sec * 1e9)) }
