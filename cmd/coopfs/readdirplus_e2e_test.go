package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/obs"
)

// scrapeMessages returns coopfs_messages_total{dir="out"} by type from a
// process's /metrics.
func scrapeMessages(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	return scrape(t, addr).SumBy(obs.MetricMessages, "type", map[string]string{"dir": obs.DirOut})
}

// sentSince is the messages of each type sent between two scrapes.
func sentSince(before, after map[string]float64) map[string]float64 {
	d := map[string]float64{}
	for k, v := range after {
		if v-before[k] > 0 {
			d[k] = v - before[k]
		}
	}
	return d
}

// TestReadDirPlusListsWithoutLookups lists a tree as `ls -l`, `find` and
// `du` do and counts the mount's messages: one ReadDirPlus per directory,
// no Lookup or GetAttr per entry. The attributes the kernel got from the
// listings are those of the export (sizes, modes, inode numbers, hard links).
func TestReadDirPlusListsWithoutLookups(t *testing.T) {
	needFUSE(t)
	export := t.TempDir()
	const dirs, files = 4, 25
	for d := 0; d < dirs; d++ {
		dir := filepath.Join(export, "tree", fmt.Sprintf("d%d", d))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for f := 0; f < files; f++ {
			os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%02d", f)), make([]byte, 100*d+f), 0o640)
		}
	}
	os.Link(filepath.Join(export, "tree", "d1", "f03"), filepath.Join(export, "tree", "d2", "hard"))
	os.Symlink("../d1/f03", filepath.Join(export, "tree", "d3", "link"))

	srv := startServer(t, export)
	metrics := e2eFreeAddr(t)
	// Long timeouts: a slow run must not see its entries expire (an
	// expired entry is looked up again, which is not what is counted here).
	m := startMount(t, srv.addr, "--metrics", metrics, "--attr-timeout", "10m")
	if _, err := os.Stat(m.path("tree")); err != nil {
		t.Fatal(err)
	}

	before := scrapeMessages(t, metrics)
	runCmd(t, time.Minute, "ls", "-lR", m.path("tree"))
	runCmd(t, time.Minute, "find", m.path("tree"), "-type", "f")
	runCmd(t, time.Minute, "du", "-s", m.path("tree"))
	seen := map[string]os.FileInfo{}
	err := filepath.WalkDir(m.path("tree"), func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		rel, _ := filepath.Rel(m.dir, p)
		seen[rel] = fi
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	sent := sentSince(before, scrapeMessages(t, metrics))
	t.Logf("messages for ls -lR, find, du and a walk with lstat of %d entries: %v", len(seen), sent)

	// Four listings of each directory: at most one ReadDirPlus each.
	wantDirs := float64(dirs + 1) // tree and its subdirectories
	if sent["ReadDirPlus"] < wantDirs || sent["ReadDirPlus"] > 4*wantDirs {
		t.Errorf("%v ReadDirPlus for %v directories listed 4 times", sent["ReadDirPlus"], wantDirs)
	}
	for _, typ := range []string{"Lookup", "LookupPinned", "ReadDir"} {
		if sent[typ] != 0 {
			t.Errorf("%v %s messages: want none (the listings carry the attributes)", sent[typ], typ)
		}
	}
	// The kernel drops a directory's atime after listing it, so a stat of
	// a directory just listed may cost a GetAttr: per directory, never per
	// file.
	if sent["GetAttr"] > 4*wantDirs {
		t.Errorf("%v GetAttr messages for %v directories: more than one per directory listing", sent["GetAttr"], wantDirs)
	}

	// The attributes are the export's.
	for rel, fi := range seen {
		want, err := os.Lstat(filepath.Join(export, rel))
		if err != nil {
			t.Fatal(err)
		}
		got, ws := fi.Sys().(*syscall.Stat_t), want.Sys().(*syscall.Stat_t)
		if fi.Size() != want.Size() || fi.Mode() != want.Mode() || got.Ino != ws.Ino ||
			got.Nlink != ws.Nlink || got.Uid != ws.Uid || !fi.ModTime().Equal(want.ModTime()) {
			t.Errorf("%s: mount says size %d mode %v ino %d nlink %d mtime %v, export %d %v %d %d %v",
				rel, fi.Size(), fi.Mode(), got.Ino, got.Nlink, fi.ModTime(), want.Size(), want.Mode(), ws.Ino, ws.Nlink, want.ModTime())
		}
	}
	// A hard link listed in two directories is one inode on the mount.
	a, _ := os.Stat(m.path("tree", "d1", "f03"))
	b, _ := os.Stat(m.path("tree", "d2", "hard"))
	if !os.SameFile(a, b) {
		t.Error("the two names of a hard link are two files on the mount")
	}
	if data, err := os.ReadFile(m.path("tree", "d3", "link")); err != nil || len(data) != 103 {
		t.Errorf("read through the listed symlink: %d bytes, %v", len(data), err)
	}
}

// TestRewinddirListsAfresh: a rewound directory stream lists the directory
// again (rewinddir(3) sees entries created since the first listing).
func TestRewinddirListsAfresh(t *testing.T) {
	needFUSE(t)
	export := t.TempDir()
	os.WriteFile(filepath.Join(export, "a"), nil, 0o644)
	srv := startServer(t, export)
	m := startMount(t, srv.addr)
	d, err := os.Open(m.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil || len(names) != 1 {
		t.Fatalf("first listing: %v, %v", names, err)
	}
	if err := os.WriteFile(m.path("b"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Seek(0, 0); err != nil {
		t.Fatal(err)
	}
	names, err = d.Readdirnames(-1)
	if err != nil || len(names) != 2 {
		t.Fatalf("listing after a rewind: %v, %v; want a and b", names, err)
	}
}
