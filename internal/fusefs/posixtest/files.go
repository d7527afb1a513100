package posixtest

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// CreateReadWrite: a created file reads back what was written, and its size
// is the written length.
func CreateReadWrite(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	data := pattern(300_001, 1) // several pages, odd length
	writeFile(t, p, data)
	wantContent(t, p, data)
	if st := lstat(t, p); st.Size != int64(len(data)) || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		t.Errorf("stat: size %d mode %o, want size %d regular file", st.Size, st.Mode, len(data))
	}
	// Overwrite the middle through a read-write descriptor.
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	must(t, "open rw", err)
	defer f.Close()
	_, err = f.WriteAt([]byte("HELLO"), 1000)
	must(t, "write at 1000", err)
	buf := make([]byte, 5)
	_, err = f.ReadAt(buf, 1000)
	must(t, "read at 1000", err)
	if string(buf) != "HELLO" {
		t.Errorf("read back through the same fd %q, want HELLO", buf)
	}
	must(t, "close", f.Close())
	copy(data[1000:], "HELLO")
	wantContent(t, p, data)
}

// Append: O_APPEND writes go to the end, whatever the offset.
func Append(t *testing.T, dir string) {
	p := filepath.Join(dir, "log")
	writeFile(t, p, []byte("one\n"))
	for _, s := range []string{"two\n", "three\n"} {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
		must(t, "open append", err)
		_, err = f.Write([]byte(s))
		must(t, "append", err)
		must(t, "close", f.Close())
	}
	wantContent(t, p, []byte("one\ntwo\nthree\n"))
}

// TruncateGrow: growing a file fills it with zeros.
func TruncateGrow(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	writeFile(t, p, []byte("abc"))
	must(t, "truncate 10000", os.Truncate(p, 10000))
	want := make([]byte, 10000)
	copy(want, "abc")
	wantContent(t, p, want)
	// ftruncate on an open descriptor, then write past the old end.
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	must(t, "open", err)
	defer f.Close()
	must(t, "ftruncate", f.Truncate(20000))
	_, err = f.WriteAt([]byte("z"), 30000)
	must(t, "write past end", err)
	must(t, "close", f.Close())
	want = append(want, make([]byte, 20001)...)
	want[30000] = 'z'
	wantContent(t, p, want)
}

// TruncateShrink: shrinking drops the tail; growing again gives zeros, not
// the old bytes.
func TruncateShrink(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	data := pattern(200_000, 2)
	writeFile(t, p, data)
	must(t, "truncate 70000", os.Truncate(p, 70_000))
	wantContent(t, p, data[:70_000])
	must(t, "truncate 100000", os.Truncate(p, 100_000))
	want := append(slices.Clone(data[:70_000]), make([]byte, 30_000)...)
	wantContent(t, p, want)
	must(t, "truncate 0", os.Truncate(p, 0))
	if st := lstat(t, p); st.Size != 0 {
		t.Errorf("size after truncate 0: %d", st.Size)
	}
}

// OpenTrunc: O_TRUNC empties an existing file.
func OpenTrunc(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	writeFile(t, p, pattern(50_000, 3))
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	must(t, "open O_TRUNC", err)
	_, err = f.Write([]byte("new"))
	must(t, "write", err)
	must(t, "close", f.Close())
	wantContent(t, p, []byte("new"))
}

// Chmod: permission bits change, the file type does not; mode 0 stays 0.
func Chmod(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	writeFile(t, p, []byte("x"))
	for _, mode := range []uint32{0o600, 0o4755, 0o000, 0o644} {
		must(t, "chmod", syscall.Chmod(p, mode))
		if st := lstat(t, p); st.Mode != syscall.S_IFREG|mode {
			t.Errorf("after chmod %o: mode %o, want %o", mode, st.Mode, syscall.S_IFREG|mode)
		}
	}
	d := filepath.Join(dir, "d")
	must(t, "mkdir", os.Mkdir(d, 0o755))
	must(t, "chmod dir", syscall.Chmod(d, 0o700))
	if st := lstat(t, d); st.Mode != syscall.S_IFDIR|0o700 {
		t.Errorf("dir mode %o, want %o", st.Mode, syscall.S_IFDIR|0o700)
	}
}

// Chown: root can give a file away (skipped for other users).
func Chown(t *testing.T, dir string) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another user needs root")
	}
	p := filepath.Join(dir, "f")
	writeFile(t, p, []byte("x"))
	must(t, "chown", os.Lchown(p, 1234, 5678))
	if st := lstat(t, p); st.Uid != 1234 || st.Gid != 5678 {
		t.Errorf("owner %d:%d, want 1234:5678", st.Uid, st.Gid)
	}
	must(t, "chgrp only", os.Lchown(p, -1, 42))
	if st := lstat(t, p); st.Uid != 1234 || st.Gid != 42 {
		t.Errorf("owner %d:%d, want 1234:42", st.Uid, st.Gid)
	}
}

// Utimes: explicit times are kept with nanosecond precision.
func Utimes(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	writeFile(t, p, []byte("x"))
	atime := time.Date(2001, 2, 3, 4, 5, 6, 123456789, time.UTC)
	mtime := time.Date(2002, 3, 4, 5, 6, 7, 987654321, time.UTC)
	must(t, "chtimes", os.Chtimes(p, atime, mtime))
	st := lstat(t, p)
	if got := time.Unix(st.Mtim.Unix()); !got.Equal(mtime) {
		t.Errorf("mtime %v, want %v", got, mtime)
	}
	if got := time.Unix(st.Atim.Unix()); !got.Equal(atime) {
		t.Errorf("atime %v, want %v", got, atime)
	}
	// UTIME_OMIT for atime leaves it alone.
	mtime2 := time.Date(2003, 1, 1, 0, 0, 0, 5, time.UTC)
	ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(mtime2.UnixNano())}
	must(t, "utimensat omit", unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, 0))
	st = lstat(t, p)
	if got := time.Unix(st.Mtim.Unix()); !got.Equal(mtime2) {
		t.Errorf("mtime %v, want %v", got, mtime2)
	}
	if got := time.Unix(st.Atim.Unix()); !got.Equal(atime) {
		t.Errorf("atime changed to %v by UTIME_OMIT, want %v", got, atime)
	}
}

// UtimesNow: UTIME_NOW (touch) sets the times to the current time.
func UtimesNow(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	writeFile(t, p, []byte("x"))
	old := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	must(t, "chtimes", os.Chtimes(p, old, old))
	before := time.Now().Add(-time.Second) // clock granularity of the server
	ts := []unix.Timespec{{Nsec: unix.UTIME_NOW}, {Nsec: unix.UTIME_NOW}}
	must(t, "utimensat now", unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, 0))
	st := lstat(t, p)
	for name, ts := range map[string]syscall.Timespec{"atime": st.Atim, "mtime": st.Mtim} {
		if got := time.Unix(ts.Unix()); got.Before(before) {
			t.Errorf("%s %v after UTIME_NOW, want at least %v", name, got, before)
		}
	}
}

// MkdirRmdir: mkdir, ENOTEMPTY, ENOTDIR, rmdir, ENOENT.
func MkdirRmdir(t *testing.T, dir string) {
	d := filepath.Join(dir, "d")
	must(t, "mkdir", os.Mkdir(d, 0o750))
	if st, want := lstat(t, d), syscall.S_IFDIR|0o750&^umask(); st.Mode != want {
		t.Errorf("dir mode %o, want %o", st.Mode, want)
	}
	writeFile(t, filepath.Join(d, "f"), []byte("x"))
	wantErrno(t, "rmdir non-empty", syscall.Rmdir(d), syscall.ENOTEMPTY)
	wantErrno(t, "rmdir a file", syscall.Rmdir(filepath.Join(d, "f")), syscall.ENOTDIR)
	must(t, "unlink", os.Remove(filepath.Join(d, "f")))
	must(t, "rmdir", syscall.Rmdir(d))
	var st syscall.Stat_t
	wantErrno(t, "stat removed dir", syscall.Lstat(d, &st), syscall.ENOENT)
	wantErrno(t, "rmdir again", syscall.Rmdir(d), syscall.ENOENT)
	// Nested creation fails without the parent.
	wantErrno(t, "mkdir in missing parent", syscall.Mkdir(filepath.Join(dir, "no", "x"), 0o755), syscall.ENOENT)
}

// Unlink: removes the name; ENOENT when missing; EISDIR for a directory.
func Unlink(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	writeFile(t, p, []byte("x"))
	must(t, "unlink", syscall.Unlink(p))
	var st syscall.Stat_t
	wantErrno(t, "stat unlinked", syscall.Lstat(p, &st), syscall.ENOENT)
	wantErrno(t, "unlink missing", syscall.Unlink(p), syscall.ENOENT)
	d := filepath.Join(dir, "d")
	must(t, "mkdir", os.Mkdir(d, 0o755))
	wantErrno(t, "unlink a directory", syscall.Unlink(d), syscall.EISDIR)
	ents, err := os.ReadDir(dir)
	must(t, "readdir", err)
	if len(ents) != 1 || ents[0].Name() != "d" {
		t.Errorf("directory lists %v, want only d", ents)
	}
}

// UnlinkOpenFile: an open descriptor keeps working after its name is gone.
func UnlinkOpenFile(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	data := pattern(70_000, 4)
	writeFile(t, p, data)
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	must(t, "open", err)
	defer f.Close()
	must(t, "unlink", os.Remove(p))
	got, err := io.ReadAll(f)
	must(t, "read after unlink", err)
	if !bytes.Equal(got, data) {
		t.Errorf("read %d bytes after unlink, want the %d written", len(got), len(data))
	}
	fi, err := f.Stat()
	must(t, "fstat after unlink", err)
	if fi.Size() != int64(len(data)) {
		t.Errorf("fstat size %d, want %d", fi.Size(), len(data))
	}
	var st syscall.Stat_t
	wantErrno(t, "stat name", syscall.Lstat(p, &st), syscall.ENOENT)
}

// ExclusiveCreate: O_CREAT|O_EXCL and mkdir on an existing name give EEXIST.
func ExclusiveCreate(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	must(t, "exclusive create of a new name", err)
	f.Close()
	_, err = os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	wantErrno(t, "O_EXCL on existing file", err, syscall.EEXIST)
	wantErrno(t, "mkdir over file", syscall.Mkdir(p, 0o755), syscall.EEXIST)
	d := filepath.Join(dir, "d")
	must(t, "mkdir", os.Mkdir(d, 0o755))
	wantErrno(t, "mkdir existing", syscall.Mkdir(d, 0o755), syscall.EEXIST)
	_, err = os.OpenFile(d, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	wantErrno(t, "O_EXCL on existing dir", err, syscall.EEXIST)
	// Created with the requested mode (minus umask 022 at most).
	if st := lstat(t, p); st.Mode&0o777 != 0o600 {
		t.Errorf("created mode %o, want 600", st.Mode&0o777)
	}
}

// WriteDirectory: opening a directory for writing gives EISDIR.
func WriteDirectory(t *testing.T, dir string) {
	d := filepath.Join(dir, "d")
	must(t, "mkdir", os.Mkdir(d, 0o755))
	_, err := os.OpenFile(d, os.O_WRONLY, 0)
	wantErrno(t, "open dir O_WRONLY", err, syscall.EISDIR)
	_, err = os.OpenFile(d, os.O_RDWR, 0)
	wantErrno(t, "open dir O_RDWR", err, syscall.EISDIR)
	f, err := os.Open(d)
	must(t, "open dir read-only", err)
	_, err = f.Read(make([]byte, 10))
	wantErrno(t, "read(2) of a directory", err, syscall.EISDIR)
	f.Close()
}

// NotADirectory: a file used as a path component gives ENOTDIR.
func NotADirectory(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	writeFile(t, p, []byte("x"))
	_, err := os.Open(filepath.Join(p, "x"))
	wantErrno(t, "open file/x", err, syscall.ENOTDIR)
	wantErrno(t, "mkdir file/x", syscall.Mkdir(filepath.Join(p, "x"), 0o755), syscall.ENOTDIR)
	_, err = os.ReadDir(p)
	wantErrno(t, "readdir of a file", err, syscall.ENOTDIR)
}

// Fsync: fsync and fdatasync succeed and the data stays.
func Fsync(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	f, err := os.Create(p)
	must(t, "create", err)
	defer f.Close()
	data := pattern(1<<20+17, 5)
	_, err = f.Write(data)
	must(t, "write", err)
	must(t, "fsync", f.Sync())
	must(t, "fdatasync", unix.Fdatasync(int(f.Fd())))
	wantContent(t, p, data) // another descriptor, while this one is open
	must(t, "close", f.Close())
	wantContent(t, p, data)
}

// Statfs: statfs reports a plausible file system.
func Statfs(t *testing.T, dir string) {
	var st syscall.Statfs_t
	must(t, "statfs", syscall.Statfs(dir, &st))
	if st.Bsize <= 0 || st.Blocks == 0 || st.Namelen <= 0 || st.Bfree > st.Blocks || st.Bavail > st.Blocks {
		t.Errorf("implausible statfs: %+v", st)
	}
}

// SeekPreadPwrite: positioned I/O at odd offsets across page and request
// boundaries, and reads at or past the end.
func SeekPreadPwrite(t *testing.T, dir string) {
	p := filepath.Join(dir, "f")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	must(t, "create", err)
	defer f.Close()
	model := []byte{}
	offsets := []int64{4095, 1, 131071, 1<<20 + 3, 77777, 0, 2<<20 - 1}
	for i, off := range offsets {
		chunk := pattern(5000+i*999, byte(i))
		_, err := f.WriteAt(chunk, off)
		must(t, "pwrite", err)
		if end := off + int64(len(chunk)); end > int64(len(model)) {
			model = append(model, make([]byte, end-int64(len(model)))...)
		}
		copy(model[off:], chunk)
	}
	for _, off := range []int64{0, 4094, 131070, 1<<20 + 1, int64(len(model)) - 10} {
		buf := make([]byte, 9000)
		n, err := f.ReadAt(buf, off)
		if err != nil && err != io.EOF {
			t.Fatalf("pread at %d: %v", off, err)
		}
		want := model[off:min(off+9000, int64(len(model)))]
		if !bytes.Equal(buf[:n], want) {
			t.Errorf("pread at %d: %d bytes differ from what was written", off, n)
		}
	}
	end, err := f.Seek(0, io.SeekEnd)
	must(t, "seek end", err)
	if end != int64(len(model)) {
		t.Errorf("SEEK_END at %d, want %d", end, len(model))
	}
	n, err := f.Read(make([]byte, 10))
	if n != 0 || err != io.EOF {
		t.Errorf("read at end: %d, %v; want 0, EOF", n, err)
	}
	n, err = f.ReadAt(make([]byte, 10), int64(len(model))+1000)
	if n != 0 || err != io.EOF {
		t.Errorf("pread past end: %d, %v; want 0, EOF", n, err)
	}
	cur, err := f.Seek(-5, io.SeekCurrent)
	must(t, "seek current", err)
	buf := make([]byte, 5)
	_, err = io.ReadFull(f, buf)
	must(t, "read last 5", err)
	if !bytes.Equal(buf, model[cur:]) {
		t.Errorf("last 5 bytes %v, want %v", buf, model[cur:])
	}
	must(t, "close", f.Close())
	wantContent(t, p, model)
}

// ConcurrentReaders: several readers of one file, each with its own
// descriptor and order, see identical bytes.
func ConcurrentReaders(t *testing.T, dir string) {
	p := filepath.Join(dir, "big")
	size := 16 << 20
	if testing.Short() {
		size = 4 << 20
	}
	data := pattern(size, 6)
	writeFile(t, p, data)
	const readers = 4
	var wg sync.WaitGroup
	errs := make([]string, readers)
	for r := range readers {
		wg.Go(func() {
			f, err := os.Open(p)
			if err != nil {
				errs[r] = err.Error()
				return
			}
			defer f.Close()
			const chunk = 256 << 10
			n := size / chunk
			buf := make([]byte, chunk)
			for i := range n {
				// reader r walks the chunks with stride r+1 (mod n).
				c := (i*(2*r+1) + r) % n
				if _, err := f.ReadAt(buf, int64(c*chunk)); err != nil {
					errs[r] = err.Error()
					return
				}
				if !bytes.Equal(buf, data[c*chunk:(c+1)*chunk]) {
					errs[r] = "chunk differs"
					return
				}
			}
		})
	}
	wg.Wait()
	for r, e := range errs {
		if e != "" {
			t.Errorf("reader %d: %s", r, e)
		}
	}
}

// LargeSparseFile: a write far past the end makes a file whose hole reads
// as zeros and takes (almost) no space.
func LargeSparseFile(t *testing.T, dir string) {
	p := filepath.Join(dir, "sparse")
	f, err := os.Create(p)
	must(t, "create", err)
	defer f.Close()
	const off = 5<<30 + 12345 // beyond 32 bits
	_, err = f.WriteAt([]byte("end"), off)
	must(t, "write at 5 GiB", err)
	must(t, "close", f.Close())
	st := lstat(t, p)
	if st.Size != off+3 {
		t.Errorf("size %d, want %d", st.Size, off+3)
	}
	if st.Blocks*512 >= st.Size/2 {
		t.Errorf("sparse file uses %d blocks of 512 bytes for size %d", st.Blocks, st.Size)
	}
	g, err := os.Open(p)
	must(t, "open", err)
	defer g.Close()
	buf := make([]byte, 64<<10)
	for _, at := range []int64{0, 1 << 30, off - int64(len(buf))} {
		_, err := g.ReadAt(buf, at)
		must(t, "read hole", err)
		if !bytes.Equal(buf, make([]byte, len(buf))) {
			t.Errorf("hole at %d is not zeros", at)
		}
	}
	tail := make([]byte, 10)
	n, _ := g.ReadAt(tail, off-2)
	if string(tail[:n]) != "\x00\x00end" {
		t.Errorf("tail %q, want \\0\\0end", tail[:n])
	}
}
