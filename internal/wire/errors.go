package wire

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
)

// RemoteError is a request that failed at the other end. It unwraps to the
// errno, so errors.Is(err, syscall.ENOENT) works across the wire.
type RemoteError struct {
	Errno syscall.Errno
	Msg   string
}

func (e *RemoteError) Error() string {
	if e.Msg == "" {
		return e.Errno.Error()
	}
	return e.Msg
}

func (e *RemoteError) Unwrap() error { return e.Errno }

// ErrnoOf finds the errno an error stands for: a syscall.Errno in its chain,
// else EIO.
func ErrnoOf(err error) syscall.Errno {
	var errno syscall.Errno
	switch {
	case err == nil:
		return 0
	case errors.As(err, &errno):
		return errno
	case errors.Is(err, fs.ErrNotExist):
		return syscall.ENOENT
	case errors.Is(err, fs.ErrExist):
		return syscall.EEXIST
	case errors.Is(err, fs.ErrPermission):
		return syscall.EACCES
	}
	return syscall.EIO
}

// maxErrorMsg bounds an error reply's text: an error that names a long
// path (or two) says enough in its first bytes, and a text past maxString
// would not decode.
const maxErrorMsg = 4 << 10

// errorMsg turns a handler's error into its reply.
func errorMsg(err error) *Error {
	msg := err.Error()
	if len(msg) > maxErrorMsg {
		msg = msg[:maxErrorMsg] + "…"
	}
	return &Error{Errno: uint32(ErrnoOf(err)), Msg: msg}
}

// ErrClosed is returned by calls on a connection that has closed.
var ErrClosed = errors.New("connection closed")

// ConnError says why a connection ended; it wraps the cause.
type ConnError struct {
	Peer string
	Err  error
}

func (e *ConnError) Error() string { return fmt.Sprintf("connection to %s: %v", e.Peer, e.Err) }
func (e *ConnError) Unwrap() error { return e.Err }

var errNoSys = syscall.ENOSYS

// errnoValue keeps remote errnos in range; an unknown one becomes EIO.
func errnoValue(n uint32) syscall.Errno {
	if n == 0 || n > 4095 {
		return syscall.EIO
	}
	return syscall.Errno(n)
}
