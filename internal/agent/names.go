package agent

import (
	"context"
	"errors"
	"path"
	"syscall"

	"github.com/coopfs/coopfs/internal/wire"
)

// A directory's whole listing under its callback (issue 9). A name looked
// up in a directory whose every entry the agent knows, and which is not
// one of them, is answered ENOENT without a message: the kernel looks
// every name up before it creates it (tar: a negative Lookup per file).
// The agent knows a directory's every entry when it listed it under the
// directory's callback, and when it made the directory itself — the
// server grants the maker a callback on a directory it makes, checked
// empty after it is watched (internal/server: grantMade). The names are
// kept up to date through this agent's own changes (an entry added or
// removed when the server said so), and forgotten on any break of an entry
// of the directory (someone else added or removed one), on any own change
// whose outcome is not known (an error), and with the directory.

// maxFullNames bounds the names of complete listings; past it they are
// forgotten (lookups then ask the server).
const maxFullNames = 1 << 20

// setFull notes the complete listing of directory p.
func (c *cbCache) setFull(p string, ents []wire.DirEntryPlus) {
	c.dropFull(p)
	if c.fullLen+len(ents) > maxFullNames {
		c.full = make(map[string]map[string]struct{})
		c.fullLen = 0
	}
	names := make(map[string]struct{}, len(ents))
	for _, e := range ents {
		if e.Name != "." && e.Name != ".." {
			names[e.Name] = struct{}{}
		}
	}
	c.full[p] = names
	c.fullLen += len(names)
}

// dropFull forgets directory p's complete listing.
func (c *cbCache) dropFull(p string) {
	if names, ok := c.full[p]; ok {
		c.fullLen -= len(names)
		delete(c.full, p)
	}
}

// outcome is what this agent knows of one of its own entry changes.
type outcome int

const (
	done    outcome = iota // the server made the change
	refused                // the server refused it, and that says nothing new of the name
	unknown                // it may or may not have happened, or the name is not as the listing said
)

// outcomeOf classifies an entry change's error.
func outcomeOf(err error) outcome {
	var re *wire.RemoteError
	switch {
	case err == nil:
		return done
	case !errors.As(err, &re):
		return unknown // the connection, a timeout: it may have happened
	}
	switch re.Errno {
	case syscall.EACCES, syscall.EPERM, syscall.EROFS, syscall.ENAMETOOLONG, syscall.ENOTDIR,
		syscall.ENOTEMPTY, syscall.EINVAL, syscall.ELOOP, syscall.EMFILE, syscall.ENOSPC, syscall.EDQUOT:
		return refused
	}
	return unknown // EEXIST, ENOENT: the name is not what the listing said
}

// entryDone applies this agent's own change of entry p to its directory's
// complete listing: added (a create, mkdir, symlink, mknod or link) or
// removed (an unlink or rmdir).
func (c *cbCache) entryDone(p string, added bool, o outcome) {
	if p == "" {
		return
	}
	dir, name := parentOf(p), path.Base(p)
	names, ok := c.full[dir]
	switch {
	case !ok || o == refused:
	case o == unknown:
		c.dropFull(dir)
	case added:
		if _, there := names[name]; !there {
			names[name] = struct{}{}
			c.fullLen++
		}
	default:
		if _, there := names[name]; there {
			delete(names, name)
			c.fullLen--
		}
	}
}

// entryChanged notes this agent's own entry change of p (err: its
// outcome) in the callbacks cache: the directory's listing and
// attributes, p itself (removed, when it was), and the directory's
// complete listing. made, for an object this agent made, is its
// attributes, cached under the callback the server granted the maker (read
// after tok, unless a break since says otherwise); a directory made is
// empty.
func (a *Agent) entryChanged(tok cbToken, p string, added bool, err error, made *wire.Attr) {
	o := outcomeOf(err)
	cb := a.cbs
	cb.mu.Lock()
	defer cb.mu.Unlock()
	c := cb.c
	par, parOK := c.paths[parentOf(p)]
	// Before this change's own mark on the parent (changedHere): was it
	// broken by anyone else since tok?
	parFresh := parOK && par.dir && p != "" && c.fresh(tok, par.ino)
	gone := !added && o != refused // removed, or it may have been
	if h, ok := c.paths[p]; ok && gone {
		c.changedIno(h.ino) // its other names' link count
	}
	c.changedHere(p, gone)
	c.entryDone(p, added, o)
	if made == nil || o != done || !parFresh || !a.fastMeta.Load() || !c.fresh(tok, made.Ino) {
		return
	}
	if c.put(p, *made) && made.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		c.setFull(p, nil)
	}
}

// renamedHere applies this agent's rename of oldPath to newPath (flags:
// renameat2's) to the complete listings of both directories.
func (a *Agent) renamedHere(oldPath, newPath string, flags uint32, err error) {
	o := outcomeOf(err)
	cb := a.cbs
	cb.mu.Lock()
	defer cb.mu.Unlock()
	if flags&renameExchange != 0 && o == done {
		return // both names are still there
	}
	cb.c.entryDone(oldPath, false, o)
	cb.c.entryDone(newPath, true, o)
}

// renameExchange is renameat2's RENAME_EXCHANGE.
const renameExchange = 1 << 1

// smallDir is the largest directory (st_size, the bytes of its entries:
// one block of ext4's, some hundred names) that a lookup in it lists
// rather than looks up.
const smallDir = 4096

// listForLookup lists p's directory instead of looking p up when the
// directory is small and its listing not known: one message either way,
// and the listing (under the directory's callback) answers every later
// lookup in it — those of names that do not exist too, which a program
// searching for a file (Python's import: a module's `.so`, `.abi3.so`,
// `__pycache__` before its `.py`) makes many of. It reports whether the
// directory's listing is now known.
func (a *Agent) listForLookup(ctx context.Context, p string) bool {
	if p == "" || a.liveGen() == 0 {
		return false
	}
	dir := parentOf(p)
	cb := a.cbs
	cb.mu.Lock()
	h, ok := cb.c.paths[dir]
	_, known := cb.c.full[dir]
	small := ok && h.dir && h.hasAttr && h.attr.Size <= smallDir
	cb.mu.Unlock()
	if !small || known {
		return false
	}
	_, err, _ := a.flights.Do("list:"+dir, func() (any, error) {
		return a.ReadDirPlus(ctx, dir)
	})
	return err == nil
}

// nameMax is the longest name a directory's listing can hold (NAME_MAX);
// a longer one is the server's to refuse (ENAMETOOLONG).
const nameMax = 255
