package agent_test

import (
	"bytes"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/obs"
)

// TestWholeFilePartialHolder: a client reading a large file from the
// server is one of its fetchers; a second client that opens it meanwhile
// fetches it from the first, in file order: the blocks the first has at
// once, the others as they arrive there (the first waits for them while it
// reads on). The server sends the file once.
func TestWholeFilePartialHolder(t *testing.T) {
	const blocks = 96
	data := pattern(blocks*hbs+10, 7)
	addr, _, sm := wholeServer(t, data)
	c0 := newWholeAgent(t, addr, t.TempDir(), "")
	c1 := newWholeAgent(t, addr, t.TempDir(), "")
	ctx := asRoot()
	f0, _, err := c0.Open(ctx, "f", syscall.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	half := make([]byte, blocks/2*hbs)
	if _, err := f0.ReadAt(ctx, half, 0); err != nil {
		t.Fatal(err)
	}
	type result struct {
		got []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		got, err := readAll(ctx, c1.Agent, "f")
		done <- result{got, err}
	}()
	// c1 has taken the first half and waits at c0 for the rest: c0 reads
	// on, as the reader it is.
	waitFor(t, "c1 to wait for blocks on their way to c0", func() bool {
		return c0.count(t, "coopfs_wholefile_partial_waits_total") > 0
	})
	rest := make([]byte, len(data)-len(half))
	if _, err := f0.ReadAt(ctx, rest, int64(len(half))); err != nil {
		t.Fatal(err)
	}
	f0.Flush(ctx)
	f0.Release(ctx)
	r := <-done
	if r.err != nil || !bytes.Equal(r.got, data) {
		t.Fatalf("c1 read %d bytes (want %d), equal %v, err %v", len(r.got), len(data), bytes.Equal(r.got, data), r.err)
	}
	if c1.serverReads(t) != 0 || c1.layer(t, obs.LayerPeer) != blocks+1 || c1.count(t, "coopfs_wholefile_partial_fetches_total") != 1 {
		t.Errorf("c1: %v blocks from the server, %v from peers, %v partial fetches; want 0, %d, 1",
			c1.serverReads(t), c1.layer(t, obs.LayerPeer), c1.count(t, "coopfs_wholefile_partial_fetches_total"), blocks+1)
	}
	s := scrape(t, sm)
	if got := s.Sum(obs.MetricReads, map[string]string{"layer": obs.LayerServerDisk}) + s.Sum(obs.MetricReads, map[string]string{"layer": obs.LayerServerMemory}); got != blocks+1 {
		t.Errorf("the server sent %v blocks, want the file once (%d)", got, blocks+1)
	}
	if s.Sum("coopfs_wholefile_haves_total", nil) != 2 || s.Sum("coopfs_wholefile_partial_handouts_total", nil) != 1 {
		t.Errorf("server: %v haves, %v partial hand-outs; want 2 and 1",
			s.Sum("coopfs_wholefile_haves_total", nil), s.Sum("coopfs_wholefile_partial_handouts_total", nil))
	}
}

// TestWholeFilePartialStalled: a fetcher that stops reading (it keeps the
// file open) is waited for only as long as the request allows; the reader
// takes the rest from the server, and a fetcher that closes without the
// whole file leaves the fetchers.
func TestWholeFilePartialStalled(t *testing.T) {
	const blocks = 40
	data := pattern(blocks*hbs, 8)
	addr, _, _ := wholeServer(t, data)
	c0 := newWholeAgent(t, addr, t.TempDir(), "")
	ctx := asRoot()
	f0, _, err := c0.Open(ctx, "f", syscall.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f0.ReadAt(ctx, make([]byte, 10*hbs), 0); err != nil {
		t.Fatal(err)
	}
	c1 := newWholeAgentTimeout(t, addr, t.TempDir(), "", time.Second) // gives up on a stalled holder after 0.5 s
	c1.mustRead(t, "f", data)
	if c1.layer(t, obs.LayerPeer) == 0 || c1.serverReads(t) == 0 || c1.count(t, "coopfs_wholefile_peer_failures_total") == 0 {
		t.Errorf("c1: %v blocks from c0, %v from the server, %v failures; want some of each",
			c1.layer(t, obs.LayerPeer), c1.serverReads(t), c1.count(t, "coopfs_wholefile_peer_failures_total"))
	}
	f0.Flush(ctx)
	f0.Release(ctx)
	if c0.count(t, "coopfs_wholefile_drops_sent_total") != 1 {
		t.Errorf("c0 closed without the whole file: %v drops, want 1", c0.count(t, "coopfs_wholefile_drops_sent_total"))
	}
	// c1 holds it whole now: the next reader is not handed c0.
	c2 := newWholeAgent(t, addr, t.TempDir(), "")
	c2.mustRead(t, "f", data)
	if c2.serverReads(t) != 0 || c2.count(t, "coopfs_wholefile_peer_failures_total") != 0 {
		t.Errorf("c2: %v server reads, %v failures (%s)", c2.serverReads(t), c2.count(t, "coopfs_wholefile_peer_failures_total"), c2.wholeCounts(t))
	}
}

// TestWholeFileManyDigests: a file of more blocks than an open's reply
// carries digests of is fetched from its holder, the other digests asked
// for as the fetch goes (there is no limit on a file's blocks).
func TestWholeFileManyDigests(t *testing.T) {
	const blocks = 700 // the reply carries 64
	data := pattern(blocks*hbs-5, 9)
	addr, _, sm := wholeServer(t, data)
	c0 := newWholeAgent(t, addr, t.TempDir(), "")
	c0.mustRead(t, "f", data)
	c1 := newWholeAgent(t, addr, t.TempDir(), "")
	c1.mustRead(t, "f", data)
	if c1.serverReads(t) != 0 || c1.layer(t, obs.LayerPeer) != blocks {
		t.Errorf("c1: %v blocks from the server, %v from the holder; want 0 and %d", c1.serverReads(t), c1.layer(t, obs.LayerPeer), blocks)
	}
	if got := scrape(t, sm).Sum("coopfs_wholefile_digest_requests_total", nil); got < 2 {
		t.Errorf("%v digest requests, want at least 2 (700 blocks, 64 a page)", got)
	}
}

// TestWholeFileCachedOpen: an open for reading of a large file held whole,
// whose attributes a server callback covers, sends no message; a change by
// another client breaks the callback, and the next open revalidates.
func TestWholeFileCachedOpen(t *testing.T) {
	data := pattern(100*hbs, 10) // more blocks than a plain cached open takes
	addr, _, _ := wholeServer(t, data)
	c0 := newWholeAgent(t, addr, t.TempDir(), "")
	c0.attr(t, "") // as the kernel looks names up before an open: the callbacks cover them
	c0.attr(t, "f")
	c0.mustRead(t, "f", data) // from the server: joins the map
	out := func() float64 {   // the messages an open sends (a batched release may leave any time)
		s := scrape(t, c0.m)
		return s.Sum(obs.MetricMessages, map[string]string{"dir": obs.DirOut, "type": "Open"}) +
			s.Sum(obs.MetricMessages, map[string]string{"dir": obs.DirOut, "type": "WholeOpen"}) +
			s.Sum(obs.MetricMessages, map[string]string{"dir": obs.DirOut, "type": "GetAttr"})
	}
	before := out()
	c0.mustRead(t, "f", data)
	if got := out() - before; got != 0 || c0.count(t, "coopfs_wholefile_cached_opens_total") == 0 {
		t.Errorf("an open of a current whole copy sent %v messages (cached opens %v), want none", got, c0.count(t, "coopfs_wholefile_cached_opens_total"))
	}
	c1 := newWholeAgent(t, addr, t.TempDir(), "")
	v2 := append([]byte("changed"), data[7:]...)
	writeFile(t, c1.Agent, "f", v2)
	c0.attr(t, "f")
	before = out()
	c0.mustRead(t, "f", v2)
	if got := out() - before; got == 0 {
		t.Error("an open after a change sent no message")
	}
}

// wholeCounts lists a client's wholefile counters (for failure messages).
func (h *hintsAgent) wholeCounts(t *testing.T) string {
	t.Helper()
	var out []string
	for _, n := range []string{"hits", "fetches", "partial_fetches", "peer_failures", "bad_blocks", "resplits", "haves_sent", "drops_sent"} {
		out = append(out, fmt.Sprintf("%s %v", n, h.count(t, "coopfs_wholefile_"+n+"_total")))
	}
	s := scrape(t, h.m)
	out = append(out, fmt.Sprintf("segments peer %v server %v", s.Sum("coopfs_wholefile_segments_total", map[string]string{"source": "peer"}),
		s.Sum("coopfs_wholefile_segments_total", map[string]string{"source": "server"})))
	return strings.Join(out, ", ")
}
