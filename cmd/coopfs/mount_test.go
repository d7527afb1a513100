package main

import (
	"strings"
	"testing"
)

// TestDefaultMountName: the default --name differs between mount points
// of one host and between hosts, is the same for the same mount point
// however it is spelled, and stays bounded for a long path.
func TestDefaultMountName(t *testing.T) {
	a := defaultMountName("h1", "/mnt/a")
	if b := defaultMountName("h1", "/mnt/b"); a == b {
		t.Errorf("two mount points of one host share the name %q", a)
	}
	if c := defaultMountName("h2", "/mnt/a"); a == c {
		t.Errorf("two hosts share the name %q", a)
	}
	if again := defaultMountName("h1", "/mnt//a/"); again != a {
		t.Errorf("the same mount point spelled differently: %q and %q", again, a)
	}
	if a != "h1:/mnt/a" {
		t.Errorf("name %q; want h1:/mnt/a", a)
	}
	long := "/" + strings.Repeat("d/", 200)
	n1, n2 := defaultMountName("h1", long+"x"), defaultMountName("h1", long+"y")
	if len(n1) > maxDefaultName || n1 == n2 {
		t.Errorf("long mount points: %q (%d bytes) and %q; want distinct names of at most %d bytes", n1, len(n1), n2, maxDefaultName)
	}
}
