package wire

import "syscall"

// Mutates reports whether request m (or the request an As wraps) changes
// the export: a read-only export (serve --read-only) and a read-only
// proxy (proxy --write-policy read-only) refuse it with EROFS.
func Mutates(m Msg) bool {
	if as, ok := m.(*As); ok {
		m = as.Msg
	}
	switch m := m.(type) {
	case *SetAttr, *Mkdir, *Create, *Unlink, *Rmdir, *Rename, *Link, *Symlink, *Write,
		*Mknod, *SetXattr, *RemoveXattr, *Fallocate, *WriteSeq, *WriteBase, *Commit, *CommitNew, *EntryBatch:
		return true
	case *Open:
		return m.Flags&(syscall.O_WRONLY|syscall.O_RDWR|syscall.O_TRUNC) != 0
	}
	return false
}
