package fusefs

import (
	"context"
	"errors"
	"io/fs"
	"syscall"
)

// ToErrno is the one place where an error becomes an errno: nil → 0, an
// error wrapping a syscall.Errno → that errno, context.Canceled (an
// interrupted request) → EINTR, the io/fs sentinels ErrNotExist, ErrExist,
// ErrPermission → ENOENT, EEXIST, EACCES, and anything else → EIO.
func ToErrno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if errno == 0 {
			return syscall.EIO
		}
		return errno
	}
	switch {
	case errors.Is(err, context.Canceled):
		return syscall.EINTR
	case errors.Is(err, fs.ErrNotExist):
		return syscall.ENOENT
	case errors.Is(err, fs.ErrExist):
		return syscall.EEXIST
	case errors.Is(err, fs.ErrPermission):
		return syscall.EACCES
	}
	return syscall.EIO
}
