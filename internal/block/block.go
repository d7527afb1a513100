// Package block names the unit every coopfs cache, policy and message deals in:
// a fixed-size block of one file, tagged with the file version it belongs to.
package block

import "fmt"

// ID names one block: the server's file id and the block's index in the file
// (byte offset / block size).
type ID struct {
	File  uint64
	Index uint64
}

func (id ID) String() string { return fmt.Sprintf("%d:%d", id.File, id.Index) }

// Version is a file's commit counter as the server hands it out. Versions of one
// file only grow: a larger version is a newer file. Zero means "unknown".
type Version uint64

// Span returns the indexes of the blocks that the byte range [off, off+n)
// touches, for blocks of size bs: first and last inclusive. n must be > 0.
func Span(off, n int64, bs int) (first, last uint64) {
	return uint64(off / int64(bs)), uint64((off + n - 1) / int64(bs))
}
