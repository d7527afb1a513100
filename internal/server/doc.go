// Package server is `coopfs serve`: it exports a directory tree to coopfs
// clients over the wire protocol. It is the authority for data and metadata:
// every file has a version (commit counter) that changes whenever the file's
// content changes, through a client or behind coopfs's back (a change of
// size, mtime or ctime seen by stat), and every block it hands out is tagged
// with that version. It keeps a memory block cache of its own (the
// "server memory" layer in front of the export's disk). It grants clients
// callbacks on what it hands out and breaks them before any change —
// through a client, or made directly in the export and seen by inotify —
// is answered (callbacks.go, watch.go).
//
// The coordination policy (Config.Policy) sits behind one seam (policy.go):
// the server reports clients joining and leaving, files changing, its
// memory's evictions, misses and the policy's own messages, and the
// policy's adapter decides (pdirectory.go with coop.go around
// internal/coord/directory; phints.go around internal/coord/hints, with the
// discard cache).
//
// File system access goes through os.Root, so no path a client sends can
// leave the export, whatever symlinks the tree holds.
package server
