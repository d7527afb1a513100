package hintsim

import (
	"fmt"
	mbits "math/bits"

	"github.com/coopfs/coopfs/internal/block"
)

// Check verifies the invariants: every client's and the server's state
// machine is consistent and within its cache size, and a block has more
// than one master copy only as often as the documented race happened
// (SecondMasters: a server fetch while a master copy was cached
// elsewhere).
func (a *Algorithm) Check() error {
	for _, cl := range a.clients {
		if err := cl.Check(); err != nil {
			return err
		}
		if cl.Len() > cl.Capacity() {
			return fmt.Errorf("client %d holds %d blocks, capacity %d", cl.ID(), cl.Len(), cl.Capacity())
		}
	}
	if err := a.srv.Check(); err != nil {
		return err
	}
	if n := a.srv.MemoryLen(); n > a.p.ServerCacheBlocks {
		return fmt.Errorf("server memory holds %d blocks, capacity %d", n, a.p.ServerCacheBlocks)
	}
	if err := a.checkHolders(); err != nil {
		return err
	}
	masters := make(map[block.ID]int)
	dups := int64(0)
	for _, cl := range a.clients {
		for _, b := range cl.Masters(nil) {
			if b.Version < a.srv.Version(b.ID.File) {
				continue // stale, dropped when next looked at
			}
			masters[b.ID]++
			if masters[b.ID] > 1 {
				dups++
			}
		}
	}
	if dups > a.SecondMasters {
		return fmt.Errorf("%d extra master copies, but only %d came from the documented race", dups, a.SecondMasters)
	}
	return nil
}

// checkHolders verifies the holder index: each bit names a client that
// caches the block, and there are as many bits as cached blocks.
func (a *Algorithm) checkHolders() error {
	if !a.holders.on {
		return nil
	}
	total, bits := 0, 0
	for _, cl := range a.clients {
		total += cl.Len()
	}
	var bad error
	a.holders.each(func(b block.ID, m uint64) {
		for ; m != 0; m &= m - 1 {
			i := mbits.TrailingZeros64(m)
			if ok, _ := a.clients[i].Has(b); !ok && bad == nil {
				bad = fmt.Errorf("holder index: client %d does not cache %v", i, b)
			}
			bits++
		}
	})
	if bad != nil {
		return bad
	}
	if bits != total {
		return fmt.Errorf("holder index has %d entries, the clients cache %d blocks", bits, total)
	}
	return nil
}
