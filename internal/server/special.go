package server

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/coopfs/coopfs/internal/wire"
)

// The server opens only regular files and directories. A FIFO, a device or
// a socket in the export is the client kernel's business (it never sends an
// open for one); opening it here could block a handler forever (a FIFO
// without a writer) or touch a device. Opens therefore check the type
// first, open with O_NONBLOCK (a FIFO swapped in between cannot block) and
// check the type again on the open file.

// errSpecial is the error for an open of a special file.
func errSpecial(p string) error {
	return fmt.Errorf("open %s: a FIFO, device or socket is not opened through the server: %w", p, syscall.ENXIO)
}

// openable refuses a path that names a special file or a symbolic link
// now. The client's kernel follows symbolic links itself (readlink), so an
// open never has to follow one in the server: one there means the export
// changed under the client, and the open fails with ELOOP, as O_NOFOLLOW
// gives.
func (s *Server) openable(p string) (exists bool, err error) {
	fi, err := s.lstatAny(p)
	if err != nil {
		// The open itself reports it (or creates the file); only a name
		// that is certainly not there counts as missing.
		return !errors.Is(err, os.ErrNotExist), nil
	}
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		return true, fmt.Errorf("open %s: a symbolic link is followed by the client, not the server: %w", p, syscall.ELOOP)
	case !fi.Mode().IsRegular() && !fi.IsDir():
		return true, errSpecial(p)
	}
	return true, nil
}

// openData opens p for data without ever blocking on a special file, and
// returns the open file with its stat.
func (s *Server) openData(p string, flags, mode uint32) (*os.File, os.FileInfo, error) {
	open := func() (*os.File, error) {
		if s.openat2 {
			return s.openFileBeneath(p, int(flags)|syscall.O_NONBLOCK, mode)
		}
		return s.root.OpenFile(p, int(flags)|syscall.O_CLOEXEC|syscall.O_NONBLOCK, fileMode(mode))
	}
	f, err := open()
	if err != nil && wire.IsExhaustion(err) && s.pins.closeAll() > 0 {
		f, err = open() // shed what can be given back (the pinned lookups), once
	}
	if err != nil {
		if errors.Is(err, syscall.ENXIO) {
			return nil, nil, errSpecial(p) // a FIFO without a reader, opened for writing
		}
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() && !fi.IsDir() {
		f.Close()
		return nil, nil, errSpecial(p)
	}
	return f, fi, nil
}
