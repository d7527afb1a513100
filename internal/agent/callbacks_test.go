package agent

import (
	"fmt"
	"path"
	"syscall"
	"testing"

	"github.com/coopfs/coopfs/internal/wire"
)

// checkCache verifies cbCache's invariant.
func checkCache(c *cbCache) error {
	for p, h := range c.paths {
		if p != "" {
			if _, ok := c.paths[parentOf(p)]; !ok {
				return fmt.Errorf("%q cached without its parent", p)
			}
			if _, ok := c.kids[parentOf(p)][path.Base(p)]; !ok {
				return fmt.Errorf("%q missing from its parent's kids", p)
			}
		}
		if _, ok := c.byIno[h.ino][p]; !ok {
			return fmt.Errorf("%q missing from byIno[%d]", p, h.ino)
		}
	}
	for p := range c.lists {
		if h, ok := c.paths[p]; !ok || !h.dir {
			return fmt.Errorf("listing of %q which is not a cached directory", p)
		}
	}
	return nil
}

func dirAttr(ino uint64) wire.Attr { return wire.Attr{Ino: ino, Mode: syscall.S_IFDIR | 0o755} }
func fileAttr(ino uint64) wire.Attr {
	return wire.Attr{Ino: ino, Mode: syscall.S_IFREG | 0o644, Version: ino * 10}
}

func TestCallbackCacheInstallBreak(t *testing.T) {
	c := newCBCache()
	tok := c.token()
	if c.install(tok, "", dirAttr(1)) {
		t.Fatal("installed without a registered connection")
	}
	c.reset(1)
	tok = c.token()
	if c.install(tok, "a/f", fileAttr(3)) {
		t.Fatal("installed a name whose directory is not held")
	}
	for p, a := range map[string]wire.Attr{"": dirAttr(1)} {
		c.install(tok, p, a)
	}
	c.install(tok, "a", dirAttr(2))
	c.installList(tok, "a", []wire.DirEntryPlus{
		{DirEntry: wire.DirEntry{Name: "f", Ino: 3}, HasAttr: true, Attr: fileAttr(3)},
		{DirEntry: wire.DirEntry{Name: "g", Ino: 4}, HasAttr: true, Attr: fileAttr(4)},
		{DirEntry: wire.DirEntry{Name: "gone", Ino: 5}},
	})
	if _, ok := c.attr("a/f"); !ok {
		t.Fatal("listing did not cache its entries")
	}
	if _, ok := c.lists["a"]; !ok {
		t.Fatal("listing not cached")
	}
	if err := checkCache(c); err != nil {
		t.Fatal(err)
	}
	// A break of a file drops it, not its siblings.
	c.breakItems([]wire.BreakItem{{Ino: 3}})
	if _, ok := c.attr("a/f"); ok {
		t.Fatal("a broken file's attributes are still cached")
	}
	if _, ok := c.attr("a/g"); !ok {
		t.Fatal("a sibling was dropped")
	}
	if _, ok := c.lists["a"]; ok {
		t.Fatal("a listing kept the attributes of a file whose callback broke")
	}
	// A reply read before the break may not be cached.
	if c.install(tok, "a/f", fileAttr(3)) {
		t.Fatal("installed state older than a break of it")
	}
	if !c.install(c.token(), "a/f", fileAttr(3)) {
		t.Fatal("fresh state refused")
	}
	// A break of a directory's entry drops that entry, the listing and
	// the directory's attributes; the rest stays.
	c.breakItems([]wire.BreakItem{{Ino: 2, Name: "f"}})
	if _, ok := c.paths["a/f"]; ok || len(c.lists) != 0 {
		t.Fatalf("after an entry break: a/f cached %v, %d lists", ok, len(c.lists))
	}
	if _, ok := c.attr("a"); ok {
		t.Fatal("an entry break kept the directory's attributes")
	}
	if _, ok := c.attr("a/g"); !ok {
		t.Fatal("an entry break dropped another entry")
	}
	// A directory's callback stays: names below it may still be cached.
	if !c.install(c.token(), "a/f", fileAttr(3)) {
		t.Fatal("refused an entry of a directory whose callback holds")
	}
	c.breakItems([]wire.BreakItem{{Ino: 2, Name: wire.BreakEntries}})
	if len(c.paths) != 2 {
		t.Fatalf("after a break of all entries: %v", c.paths)
	}
	if err := checkCache(c); err != nil {
		t.Fatal(err)
	}
	// A lost connection forgets everything; old tokens are stale.
	tok = c.token()
	c.reset(0)
	if c.install(tok, "", dirAttr(1)) || len(c.paths) != 0 {
		t.Fatal("cached after the connection was lost")
	}
}

// TestCallbackCacheRacedListing: a listing read before a break of one of
// its entries (the server breaks a raced grant before it replies) caches
// the other entries but not the listing, which would hand the broken
// entry's attributes out again.
func TestCallbackCacheRacedListing(t *testing.T) {
	c := newCBCache()
	c.reset(1)
	tok := c.token()
	c.install(tok, "", dirAttr(1))
	c.install(tok, "d", dirAttr(2))
	tok = c.token()
	c.breakItems([]wire.BreakItem{{Ino: 3}}) // the raced grant's break, before the reply
	c.installList(tok, "d", []wire.DirEntryPlus{
		{DirEntry: wire.DirEntry{Name: "f", Ino: 3}, HasAttr: true, Attr: fileAttr(3)},
		{DirEntry: wire.DirEntry{Name: "g", Ino: 4}, HasAttr: true, Attr: fileAttr(4)},
	})
	if _, ok := c.lists["d"]; ok {
		t.Fatal("cached a listing that carries attributes broken since it was read")
	}
	if _, ok := c.attr("d/f"); ok {
		t.Fatal("cached the broken entry's attributes")
	}
	if _, ok := c.attr("d/g"); !ok {
		t.Fatal("did not cache an entry that did not break")
	}
	if c.missing("d/f") || !c.missing("d/h") {
		t.Fatal("the listing's names are not known")
	}
	if err := checkCache(c); err != nil {
		t.Fatal(err)
	}
}

func TestCallbackCacheOwnChanges(t *testing.T) {
	c := newCBCache()
	c.reset(7)
	tok := c.token()
	c.install(tok, "", dirAttr(1))
	c.install(tok, "d", dirAttr(2))
	c.installList(tok, "d", []wire.DirEntryPlus{{DirEntry: wire.DirEntry{Name: "f", Ino: 3}, HasAttr: true, Attr: fileAttr(3)}})
	c.changedHere("d/new", false)
	if _, ok := c.lists["d"]; ok {
		t.Fatal("own create kept the listing")
	}
	if _, ok := c.attr("d"); ok {
		t.Fatal("own create kept the directory's attributes")
	}
	if _, ok := c.attr("d/f"); !ok {
		t.Fatal("own create dropped a sibling")
	}
	// The directory's name is still held: entries below may be cached.
	if !c.install(c.token(), "d/g", fileAttr(4)) {
		t.Fatal("the directory's callback is still held")
	}
	c.changedHere("d/f", true)
	if _, ok := c.paths["d/f"]; ok {
		t.Fatal("own unlink kept the name")
	}
	c.changedIno(4)
	if _, ok := c.attr("d/g"); ok {
		t.Fatal("own write kept the attributes")
	}
	if err := checkCache(c); err != nil {
		t.Fatal(err)
	}
}

func TestCallbackCacheMissingNames(t *testing.T) {
	c := newCBCache()
	c.reset(3)
	tok := c.token()
	c.install(tok, "", dirAttr(1))
	c.install(tok, "d", dirAttr(2))
	c.installMissing(tok, "d/x")
	c.installMissing(tok, "nodir/x") // its directory is not held
	if !c.missing("d/x") || c.missing("nodir/x") {
		t.Fatal("missing names")
	}
	c.breakItems([]wire.BreakItem{{Ino: 2, Name: "y"}})
	if !c.missing("d/x") {
		t.Fatal("a break of another entry forgot a missing name")
	}
	c.breakItems([]wire.BreakItem{{Ino: 2, Name: "x"}})
	if c.missing("d/x") {
		t.Fatal("a break of the entry kept it missing")
	}
	c.installMissing(tok, "d/x") // read before that break
	if c.missing("d/x") {
		t.Fatal("a missing name older than a break of its directory was cached")
	}
	c.installMissing(c.token(), "d/x")
	c.changedHere("d/x", false) // created by this agent
	if c.missing("d/x") {
		t.Fatal("an own create kept the name missing")
	}
	c.installMissing(c.token(), "d/z")
	c.breakItems([]wire.BreakItem{{Ino: 2, Name: wire.BreakEntries}})
	if c.missing("d/z") || c.negLen != 0 {
		t.Fatalf("a break of every entry kept missing names (%d)", c.negLen)
	}
}
