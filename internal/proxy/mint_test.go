package proxy

import (
	"testing"
	"time"
)

// TestMintedVersionsAreNotTheServers: a version the proxy mints for a dirty
// file is never taken for one of the server's (counted from its boot time,
// or derived from a file's state with the top bit set), nor the other way
// round: a derived upstream version taken for a minted one made the proxy
// serve a file's blocks at the wrong version (EIO on opens after a restart).
func TestMintedVersionsAreNotTheServers(t *testing.T) {
	w := &writeBack{}
	w.minted.Store(uint64(time.Now().UnixNano()))
	for _, v := range []uint64{w.mint(), w.mint()} {
		if !isMinted(v) {
			t.Errorf("minted %#x is not recognised as minted", v)
		}
	}
	counter := uint64(time.Now().UnixNano()) + 1e6
	for _, v := range []uint64{counter, derivedBit | 0x0123456789abcdef, derivedBit | mintBit | 42, ^uint64(0)} {
		if isMinted(v) {
			t.Errorf("server version %#x is taken for a minted one", v)
		}
	}
}
