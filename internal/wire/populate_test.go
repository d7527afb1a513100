package wire

import "testing"

// TestAllocDataZeroed: a populated buffer is as make gives it, whatever
// its size and alignment.
func TestAllocDataZeroed(t *testing.T) {
	for _, n := range []int{0, 1, 4095, populateMin - 1, populateMin, populateMin + 1, 1<<20 + 17, 3 << 20} {
		b := AllocData(n)
		if len(b) != n {
			t.Fatalf("AllocData(%d) has length %d", n, len(b))
		}
		for i, c := range b {
			if c != 0 {
				t.Fatalf("AllocData(%d)[%d] = %d, want 0", n, i, c)
			}
		}
		// An offset slice (not page-aligned) is populated too without harm.
		if n > 100 {
			populate(b[3:])
			if b[3] != 0 {
				t.Fatal("populate changed the contents")
			}
		}
	}
}
