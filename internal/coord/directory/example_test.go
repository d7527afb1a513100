package directory_test

import (
	"fmt"
	"time"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/coord/directory"
)

// How the live processes drive the two state machines. The server holds one
// Directory per export behind a mutex, in its read path; every client holds
// one Holder behind a mutex, in its peer listener and its cache's eviction
// hook. Messages between them are the caller's business.
func Example() {
	dir, _ := directory.New(directory.Config{Entries: 1 << 20})
	a, _ := directory.NewHolder(directory.HolderConfig{}) // client 1
	now := time.Duration(0)                               // e.g. time.Since(start)
	id := block.ID{File: 42, Index: 0}
	const v block.Version = 3 // the file's current version, from the server's attributes

	// Server, on a READ from client 1 (its local miss):
	act := dir.Request(now, 1, id, v)
	fmt.Println("client 1:", act.Kind) // nobody holds it: the server sends it
	// ... and when its block cache fills or evicts: dir.ServerCached(id) / dir.ServerEvicted(id)

	// Server, on a READ from client 2 for the same block:
	act = dir.Request(now, 2, id, v)
	fmt.Println("client 2:", act.Kind, "to", act.To, "version", act.Version)

	// Client 1's peer listener, on the forward: it looks up its cache...
	r := a.Forward(act.Block, act.Version, directory.Local{State: directory.Present, Version: 3})
	fmt.Println("holder answers:", r.Answer) // send the block to client 2

	// Later client 1 evicts the block: its cache's eviction hook queues it;
	// a non-nil batch is a discard notification to send to the server.
	if batch := a.Evicted(id); batch != nil {
		dir.Discarded(1, batch)
	}
	// Client 3 asks; the directory still lists client 1, which answers
	// negatively and sends its queue at once (on demand).
	act = dir.Request(now, 3, id, v)
	r = a.Forward(act.Block, act.Version, directory.Local{})
	fmt.Println("holder answers:", r.Answer, "notify now:", len(r.Notify), "blocks")
	if act.To == 1 {
		dir.Discarded(1, r.Notify)
	}
	// Client 3, on the negative reply (or a timeout: holder NoClient), asks
	// the server again, which serves it and counts client 1's miss.
	act = dir.Retry(now, 3, id, v, 1)
	fmt.Println("retry:", act.Kind, "ping:", act.Ping != 0)
	// On data arriving at a reader: keep versions apart.
	fmt.Println("admit:", directory.Admit(3, v))

	// Failures and mounts: dir.ClientFailed / PingOK / PingFailed, dir.Tick(now)
	// periodically, dir.ClientJoined on every mount, dir.FileChanged on writes.
	s := dir.Stats()
	fmt.Println("served:", s.ServedByServer, "forwards:", s.Forwards, "misses:", s.ForwardMisses)
	// Output:
	// client 1: serve
	// client 2: forward to 1 version 3
	// holder answers: send
	// holder answers: negative notify now: 1 blocks
	// retry: serve ping: false
	// admit: use
	// served: 2 forwards: 2 misses: 1
}
