package wire

import (
	"bufio"
	"bytes"
	"runtime"
	"testing"
)

// A frame header that claims the largest data section, followed by a few
// bytes and silence, makes the reader allocate about what arrived (at most
// one block's worth up front), not the claimed size.
func TestFrameHeaderAloneAllocatesLittle(t *testing.T) {
	head, _ := appendFrame(nil, &Write{Handle: 1}, 0, 1)
	putHeader(head, header{typ: TWrite, id: 1, metaLen: uint32(len(head) - HeaderSize), dataLen: DefaultLimits.MaxData, crc: 1})
	frame := append(head, bytes.Repeat([]byte{1}, 100)...) // then EOF
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	const n = 8
	for range n {
		if _, _, err := readFrame(bufio.NewReader(bytes.NewReader(frame)), make([]byte, HeaderSize), DefaultLimits); err == nil {
			t.Fatal("a truncated frame was read")
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 2<<20 {
		t.Fatalf("a header claiming %d bytes and 100 sent made the reader allocate %d bytes", DefaultLimits.MaxData, per)
	}
}
