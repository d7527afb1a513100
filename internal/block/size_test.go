package block

import "testing"

func TestParseSize(t *testing.T) {
	for in, want := range map[string]Size{
		"512MiB": 512 << 20, "1GiB": 1 << 30, "4KiB": 4096, "100MB": 100e6,
		"1048576": 1 << 20, "1.5KiB": 1536, "16M": 16 << 20, "0": 0, "7B": 7,
	} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "MiB", "-1", "12XB", "abc"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) succeeded; want an error", bad)
		}
	}
	if s := Size(512 << 20).String(); s != "512MiB" {
		t.Errorf("String = %q", s)
	}
}

func TestSpan(t *testing.T) {
	if f, l := Span(0, 4096, 4096); f != 0 || l != 0 {
		t.Errorf("Span = %d,%d", f, l)
	}
	if f, l := Span(4095, 2, 4096); f != 0 || l != 1 {
		t.Errorf("Span = %d,%d", f, l)
	}
}
