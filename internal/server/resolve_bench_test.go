package server

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// BenchmarkResolve is the cost of the lookups resolve.go makes: an lstat
// and an open for reading of a file three directories below the export
// root (one openat2 each, the fast path every path under PATH_MAX takes),
// and, for comparison, an lstat 12 KiB deep (four chunks).
//
//	go test -run '^$' -bench Resolve ./internal/server
func BenchmarkResolve(b *testing.B) {
	export := b.TempDir()
	short := filepath.Join("src", "pkg", "dir", "file.go")
	if err := os.MkdirAll(filepath.Join(export, filepath.Dir(short)), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(export, short), []byte("x"), 0o644); err != nil {
		b.Fatal(err)
	}
	s, err := New(Config{Export: export, Squash: SquashNone})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.Run("lstat", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.lstat(short); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("open", func(b *testing.B) {
		for b.Loop() {
			f, err := s.openFileBeneath(short, syscall.O_RDONLY, 0)
			if err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	})
	b.Run("lstat-12KiB", func(b *testing.B) {
		deep := strings.TrimSuffix(strings.Repeat(strings.Repeat("n", 255)+"/", 48), "/")
		if err := os.MkdirAll(filepath.Join(export, "deep"), 0o755); err != nil {
			b.Fatal(err)
		}
		if _, err := s.root.Stat("deep"); err != nil {
			b.Fatal(err)
		}
		if err := s.root.MkdirAll(filepath.Join("deep", deep), 0o755); err != nil {
			b.Skipf("making the deep tree: %v", err)
		}
		p := filepath.Join("deep", deep)
		for b.Loop() {
			if _, err := s.lstat(p); err != nil {
				b.Fatal(err)
			}
		}
	})
}
