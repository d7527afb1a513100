package agent

import "github.com/coopfs/coopfs/internal/block"

// Test hooks of the wholefile policy (wholefile_test.go).

// WholeFileTamper changes what a holds of block index of file ino at
// version v behind the policy's back (the server still lists a as a
// holder): drop removes the block from both tiers, else its bytes are
// flipped in both.
func WholeFileTamper(a *Agent, ino, v, index uint64, drop bool) {
	id := block.ID{File: ino, Index: index}
	data, ok := a.forPeer(id, block.Version(v))
	a.cache.Remove(id)
	if a.disk.c != nil {
		a.disk.c.Remove(id)
	}
	if drop || !ok {
		return
	}
	bad := append([]byte(nil), data...)
	bad[0] ^= 0xff
	a.cache.Put(id, block.Version(v), bad)
	if a.disk.c != nil {
		a.disk.c.Put(id, block.Version(v), bad)
	}
}
