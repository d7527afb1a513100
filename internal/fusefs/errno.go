package fusefs

import (
	"context"
	"errors"
	"syscall"

	"github.com/coopfs/coopfs/internal/wire"
)

// ToErrno is the one place where an error becomes an errno: nil → 0,
// context.Canceled (an interrupted read) → EINTR, and otherwise the errno
// the wire layer finds for it (a wrapped syscall.Errno, the io/fs sentinels
// ErrNotExist, ErrExist, ErrPermission → ENOENT, EEXIST, EACCES, anything
// else → EIO).
func ToErrno(err error) syscall.Errno {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, context.Canceled):
		return syscall.EINTR
	}
	if errno := wire.ErrnoOf(err); errno != 0 {
		return errno
	}
	return syscall.EIO
}
