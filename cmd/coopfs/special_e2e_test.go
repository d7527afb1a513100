package main

import (
	"bufio"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestE2ESpecialFiles makes a FIFO, a Unix socket and a device node in the
// export through a mount: they exist in the export with their types, and
// the mount's kernel carries data through the FIFO and the socket locally
// (the server never opens them).
func TestE2ESpecialFiles(t *testing.T) {
	needFUSE(t)
	export := t.TempDir()
	srv := startServer(t, export)
	m := startMount(t, srv.addr)

	fifo := m.path("fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err == nil {
			_, err = f.WriteString("through the pipe\n")
			f.Close()
		}
		done <- err
	}()
	err := within(t, 10*time.Second, "read a FIFO on the mount", func() error {
		f, err := os.Open(fifo)
		if err != nil {
			return err
		}
		defer f.Close()
		line, err := bufio.NewReader(f).ReadString('\n')
		if err == nil && line != "through the pipe\n" {
			t.Errorf("FIFO carried %q", line)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	sock := m.path("sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Write([]byte("hello"))
			c.Close()
		}
	}()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := c.Read(buf); err != nil || string(buf) != "hello" {
		t.Errorf("socket on the mount: %q %v", buf, err)
	}
	c.Close()

	if err := syscall.Mknod(m.path("null"), syscall.S_IFCHR|0o666, int(1<<8|3)); err != nil {
		t.Fatal(err)
	}
	for name, typ := range map[string]uint32{"fifo": syscall.S_IFIFO, "sock": syscall.S_IFSOCK, "null": syscall.S_IFCHR} {
		var st syscall.Stat_t
		if err := syscall.Lstat(export+"/"+name, &st); err != nil {
			t.Errorf("%s in the export: %v", name, err)
			continue
		}
		if st.Mode&syscall.S_IFMT != typ {
			t.Errorf("%s in the export has type %o, want %o", name, st.Mode&syscall.S_IFMT, typ)
		}
		if name == "null" && st.Rdev != 1<<8|3 {
			t.Errorf("device number in the export: %#x, want 1:3", st.Rdev)
		}
	}
}
