package server

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/coopfs/coopfs/internal/wire"
)

// longName is a component of NAME_MAX bytes.
var longName = strings.Repeat("n", 255)

// mkChain makes the directories of rel (a path relative to root, as long
// as wanted) one at a time and returns the last one open.
func mkChain(t *testing.T, root, rel string) int {
	t.Helper()
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range strings.Split(rel, "/") {
		if err := unix.Mkdirat(fd, name, 0o755); err != nil && err != unix.EEXIST {
			t.Fatalf("mkdir %s: %v", name, err)
		}
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

func writeAt(t *testing.T, dirfd int, name, data string) {
	t.Helper()
	fd, err := unix.Openat(dirfd, name, unix.O_CREAT|unix.O_WRONLY|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if _, err := unix.Write(fd, []byte(data)); err != nil {
		t.Fatal(err)
	}
}

func existsAt(dirfd int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
}

// chunkCut is where beneath cuts p first: the components of p before the
// index returned make its first chunk.
func chunkCut(p string) int {
	cut := strings.LastIndexByte(p[:unix.PathMax], '/')
	return strings.Count(p[:cut], "/") + 1
}

// longPaths is a tree for the tests of long paths: export/top/n…/n… is
// more than 3 × PATH_MAX bytes deep; its directory at the cut of the first
// chunk (boundary) is where a symbolic link or a rename races. outside
// holds mirrors of parts of the tree (mirror), as an attacker would make
// them to be found through a symbolic link that climbs out.
type longPaths struct {
	export, outside string
	comps           []string // the components of the bottom directory's path
	boundary        int      // the index in comps of the first component of chunk 2
	parent          int      // the directory holding comps[boundary], open
	outBottom       int      // the mirror's bottom directory, open
	bottom          string   // the bottom directory's path from the export root
}

func newLongPaths(t *testing.T) *longPaths {
	t.Helper()
	base := t.TempDir()
	l := &longPaths{export: filepath.Join(base, "export"), outside: filepath.Join(base, "outside")}
	l.comps = []string{"top"}
	for range 50 {
		l.comps = append(l.comps, longName)
	}
	l.bottom = strings.Join(l.comps, "/")
	if len(l.bottom) <= 3*unix.PathMax {
		t.Fatalf("the tree is only %d bytes deep", len(l.bottom))
	}
	l.boundary = chunkCut(l.bottom)
	must(t, os.MkdirAll(l.export, 0o755))
	must(t, os.MkdirAll(l.outside, 0o755))
	l.parent = mkChain(t, l.export, strings.Join(l.comps[:l.boundary], "/"))
	bottom := mkChain(t, l.export, l.bottom)
	writeAt(t, bottom, "secret", "in")
	writeAt(t, bottom, "victim", "in")
	return l
}

// mirror makes outside's copy of the tree below comps[i] (with its own
// secret and victim at the bottom), to be reached by a symbolic link in
// place of comps[i], and returns the symbolic link's target (climbing from
// the directory that holds comps[i]).
func (l *longPaths) mirror(t *testing.T, i int) string {
	t.Helper()
	top := "m" + strconv.Itoa(i)
	l.outBottom = mkChain(t, l.outside, strings.Join(append([]string{top}, l.comps[i+1:]...), "/"))
	writeAt(t, l.outBottom, "secret", "outside")
	writeAt(t, l.outBottom, "victim", "outside")
	return strings.Repeat("../", i+1) + "outside/" + top
}

// TestResolveLongPaths: every kind of request on a path more than 3 ×
// PATH_MAX bytes from the export root does what it does on a short one.
func TestResolveLongPaths(t *testing.T) {
	l := newLongPaths(t)
	s, addr := testServer(t, Config{Export: l.export})
	if !s.openat2 {
		t.Skip("kernel without openat2: os.Root walks every path one component at a time")
	}
	c := dial(t, addr, 1)
	at := func(name string) string { return l.bottom + "/" + name }
	steps := []struct {
		what string
		m    wire.Msg
	}{
		{"lookup", &wire.Lookup{Path: at("secret")}},
		{"create", &wire.Create{Path: at("new"), Flags: syscall.O_RDWR | syscall.O_EXCL, Mode: 0o644}},
		{"open", &wire.Open{Path: at("secret"), Flags: syscall.O_RDONLY}},
		{"mkdir", &wire.Mkdir{Path: at("dir"), Mode: 0o755}},
		{"list", &wire.ReadDirPlus{Path: l.bottom}},
		{"chmod", &wire.SetAttr{Path: at("new"), Valid: wire.SetMode, Mode: 0o600}},
		{"truncate", &wire.SetAttr{Path: at("new"), Valid: wire.SetSize, Size: 3}},
		{"utimes", &wire.SetAttr{Path: at("new"), Valid: wire.SetAtimeNow | wire.SetMtimeNow}},
		{"rename", &wire.Rename{Old: at("new"), New: at("dir/renamed")}},
		{"link", &wire.Link{Old: at("dir/renamed"), New: at("linked")}},
		{"symlink", &wire.Symlink{Target: "linked", Path: at("sym")}},
		{"readlink", &wire.Readlink{Path: at("sym")}},
		{"setxattr", &wire.SetXattr{Path: at("linked"), Name: "user.x", Value: []byte("v")}},
		{"getxattr", &wire.GetXattr{Path: at("linked"), Name: "user.x", Size: 16}},
		{"mknod", &wire.Mknod{Path: at("fifo"), Mode: syscall.S_IFIFO | 0o644}},
		{"unlink", &wire.Unlink{Path: at("linked")}},
		{"unlink", &wire.Unlink{Path: at("dir/renamed")}},
		{"rmdir", &wire.Rmdir{Path: at("dir")}},
	}
	for _, st := range steps {
		if _, err := call(t, c, st.m); err != nil {
			t.Errorf("%s at depth %d bytes: %.200v", st.what, len(l.bottom), err)
		}
	}
	// A chain made one directory at a time through the server, as a
	// mount makes it: every depth, every place a cut can fall (after the
	// slash that ends a parent's path too).
	for p := "made"; len(p) < 3*unix.PathMax+1000; p += "/" + longName {
		if _, err := call(t, c, &wire.Mkdir{Path: p, Mode: 0o755}); err != nil {
			t.Fatalf("mkdir at depth %d bytes: %.200v", len(p), err)
		}
	}
	r, err := call(t, c, &wire.Lookup{Path: at("secret")})
	if err != nil || r.(*wire.AttrReply).Attr.Size != 2 {
		t.Errorf("lookup of the file at the bottom: %.200v %+v", err, r)
	}
	if _, err := call(t, c, &wire.Lookup{Path: at(strings.Repeat("x", 5000))}); !errors.Is(err, syscall.ENAMETOOLONG) {
		t.Errorf("lookup of a component longer than PATH_MAX: %.200v, want ENAMETOOLONG", err)
	}
	if _, err := call(t, c, &wire.Lookup{Path: strings.Repeat(l.bottom+"/", 6)}); !errors.Is(err, syscall.ENAMETOOLONG) {
		t.Errorf("lookup of a component longer than PATH_MAX: %.200v, want ENAMETOOLONG", err)
	}
}

// TestResolveLongPathsStayInTheExport: on a path longer than PATH_MAX, a
// symbolic link that climbs out of the export — at the first component of
// a chunk after the first, at the last one before a cut, in the last chunk
// — is never followed; and neither is one that a racing rename swaps in for
// the directory at a chunk boundary, again and again while requests
// resolve through it: no request reads, makes or removes anything outside.
func TestResolveLongPathsStayInTheExport(t *testing.T) {
	l := newLongPaths(t)
	s, addr := testServer(t, Config{Export: l.export})
	if !s.openat2 {
		t.Skip("kernel without openat2: os.Root's walk is tested by TestResolveStaysInTheExport")
	}
	c := dial(t, addr, 1)
	at := func(name string) string { return l.bottom + "/" + name }
	inside := func() (ino uint64) {
		r, err := call(t, c, &wire.Lookup{Path: at("secret")})
		if err != nil {
			t.Fatalf("lookup at the bottom with the tree in place: %.200v", err)
		}
		return r.(*wire.AttrReply).Attr.Ino
	}
	ino := inside()
	escaped := func(what string) {
		t.Helper()
		for _, name := range []string{"new", "newdir", "newlink", "newhard"} {
			if existsAt(l.outBottom, name) {
				t.Fatalf("%s: a request made %s outside the export", what, name)
			}
		}
		if !existsAt(l.outBottom, "victim") {
			t.Fatalf("%s: an unlink removed a file outside the export", what)
		}
		var st unix.Stat_t
		if err := unix.Fstatat(l.outBottom, "secret", &st, 0); err != nil || st.Mode&0o777 != 0o644 {
			t.Fatalf("%s: a chmod changed a file outside the export (%v, mode %o)", what, err, st.Mode&0o777)
		}
	}
	// try sends requests of every way the server resolves (openat2 in
	// chunks, and os.Root's walk for mkdir, symlink, link and chmod)
	// through the path, and undoes what they did inside.
	try := func(what string) {
		t.Helper()
		if r, err := call(t, c, &wire.Lookup{Path: at("secret")}); err == nil && r.(*wire.AttrReply).Attr.Ino != ino {
			t.Fatalf("%s: a lookup found a file outside the export", what)
		}
		call(t, c, &wire.Create{Path: at("new"), Flags: syscall.O_RDWR | syscall.O_EXCL, Mode: 0o644})
		call(t, c, &wire.Mkdir{Path: at("newdir"), Mode: 0o755})
		call(t, c, &wire.Symlink{Target: "secret", Path: at("newlink")})
		call(t, c, &wire.Link{Old: at("secret"), New: at("newhard")})
		call(t, c, &wire.SetAttr{Path: at("secret"), Valid: wire.SetMode, Mode: 0o600})
		call(t, c, &wire.Unlink{Path: at("victim")})
		escaped(what)
		for _, name := range []string{"new", "newlink", "newhard"} {
			call(t, c, &wire.Unlink{Path: at(name)})
		}
		call(t, c, &wire.Rmdir{Path: at("newdir")})
	}

	// A symbolic link in place of a directory at each of three depths.
	for _, i := range []int{l.boundary, l.boundary - 1, len(l.comps) - 3} {
		dir := mkChain(t, l.export, strings.Join(l.comps[:i], "/"))
		must(t, unix.Renameat(dir, l.comps[i], dir, "aside"))
		must(t, unix.Symlinkat(l.mirror(t, i), dir, l.comps[i]))
		if _, err := call(t, c, &wire.Lookup{Path: at("secret")}); !errors.Is(err, syscall.ELOOP) {
			t.Errorf("lookup through a symbolic link at component %d of %d: %.200v, want ELOOP", i, len(l.comps), err)
		}
		try("a symbolic link at component " + strconv.Itoa(i))
		must(t, unix.Unlinkat(dir, l.comps[i], 0))
		must(t, unix.Renameat(dir, "aside", dir, l.comps[i]))
		inside()
	}

	// A rename racing the resolution: the directory at the boundary and a
	// symbolic link out of the export trade places again and again.
	must(t, unix.Symlinkat(l.mirror(t, l.boundary), l.parent, "evil"))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := unix.Renameat2(l.parent, l.comps[l.boundary], l.parent, "evil", unix.RENAME_EXCHANGE); err != nil {
				t.Errorf("exchange: %v", err)
				return
			}
		}
	}()
	for range 300 {
		try("a racing exchange")
	}
	close(stop)
	wg.Wait()
	var st unix.Stat_t
	must(t, unix.Fstatat(l.parent, l.comps[l.boundary], &st, unix.AT_SYMLINK_NOFOLLOW))
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		must(t, unix.Renameat2(l.parent, l.comps[l.boundary], l.parent, "evil", unix.RENAME_EXCHANGE))
	}
	if got := inside(); got != ino {
		t.Errorf("after the race the bottom's file is inode %d, want %d", got, ino)
	}
}
