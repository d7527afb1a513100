package classic

import (
	"unsafe"

	"github.com/coopfs/coopfs/internal/sim"
	"github.com/coopfs/coopfs/internal/sim/prefetch"
)

var (
	_ sim.Toucher = (*NChance)(nil)
	_ sim.Toucher = (*GMS)(nil)
	_ sim.Toucher = (*GlobalLRU)(nil)
)

// touchWindow is how many accesses ahead Touch prefetches the block
// records of.
const touchWindow = 32

// touchWindow returns the caches' sim.Toucher window: with one client
// (no block records) a window longer than any batch, so that Run never
// calls Touch.
func (c *caches) touchWindow() int {
	if c.single {
		return 1 << 30
	}
	return touchWindow
}

// prefetch asks the processor for the block records of ahead's accesses
// (the first load of every access, at a random place in the largest
// table), a window before they are simulated. It only prefetches: the
// results cannot depend on it.
func (c *caches) prefetch(ahead []sim.Access) {
	if len(ahead) == 0 || len(c.bl) == 0 {
		return
	}
	prefetch.Words(unsafe.Pointer(&c.bl[0]), &ahead[0].ID, unsafe.Sizeof(ahead[0]), len(ahead))
}

// TouchWindow implements sim.Toucher.
func (x *NChance) TouchWindow() int { return x.c.touchWindow() }

// Touch implements sim.Toucher: see caches.prefetch.
func (x *NChance) Touch(ahead []sim.Access) { x.c.prefetch(ahead) }

// TouchWindow implements sim.Toucher.
func (g *GMS) TouchWindow() int { return g.c.touchWindow() }

// Touch implements sim.Toucher: see caches.prefetch.
func (g *GMS) Touch(ahead []sim.Access) { g.c.prefetch(ahead) }

// TouchWindow implements sim.Toucher.
func (g *GlobalLRU) TouchWindow() int { return g.c.touchWindow() }

// Touch implements sim.Toucher: see caches.prefetch.
func (g *GlobalLRU) Touch(ahead []sim.Access) { g.c.prefetch(ahead) }
