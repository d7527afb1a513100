package agent_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/agent"
	"github.com/coopfs/coopfs/internal/obs"
	"github.com/coopfs/coopfs/internal/wire"
)

// Attacks by a member (it holds the cluster's credentials; here the
// loopback servers run without a secret): a raw client that speaks the
// protocol with an identity key of its own, not a mount.

type member struct {
	key  ed25519.PrivateKey
	conn *wire.Conn // to the server
	sec  *wire.Security
}

func newMember(t *testing.T, addr string) *member {
	t.Helper()
	_, key, _ := ed25519.GenerateKey(nil)
	m := &member{key: key, sec: wire.MustSecurity(wire.SecurityConfig{Insecure: true})}
	m.conn = m.dial(t, addr, wire.RoleClient, "mallory")
	return m
}

// dial connects to a server or a client's peer listener, proving m's key.
func (m *member) dial(t *testing.T, addr string, role wire.Role, name string) *wire.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	hs, err := wire.ClientHandshakeAs(t.Context(), nc, m.sec, "", wire.Hello{Role: role, Name: name, BootID: 1}, m.key)
	if err != nil {
		t.Fatal(err)
	}
	c := wire.NewConn(hs.Conn, hs.Reader, wire.ConnConfig{Handler: wire.HandlerFunc(
		func(context.Context, *wire.Conn, wire.Msg) (wire.Msg, error) { return nil, nil })})
	t.Cleanup(func() { c.Close() })
	return c
}

// open opens path for reading on the server: the handle, the attributes and
// the capability the server issued.
func (m *member) open(t *testing.T, path string) *wire.OpenReply {
	t.Helper()
	r, err := m.conn.Call(t.Context(), &wire.Open{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	return r.(*wire.OpenReply)
}

// A member offers the server's discard cache a block of a file it may
// read, with its own capability for it but bytes of its choosing; the
// discard cache's blocks are served as the server's own. An honest reader
// must still get the export's bytes.
func TestAttackHintsDiscardPoison(t *testing.T) {
	export := t.TempDir()
	data := pattern(3*hbs, 31)
	writeExport(t, export, "f", data)
	sm := obs.NewMetrics()
	addr := startPolicyServer(t, export, "hints", sm, 1<<20)
	mal := newMember(t, addr)
	or := mal.open(t, "f")
	// Reading the block first makes the server know its digest: what is
	// refused below is the wrong bytes, not an unknown block.
	if _, err := mal.conn.Call(t.Context(), &wire.ReadBlock{Handle: or.Handle, File: or.Attr.Ino, Index: 1, Version: or.Attr.Version}); err != nil {
		t.Fatal(err)
	}
	poison := bytes.Repeat([]byte("POISONED-BY-MEMBER"), hbs/18+1)[:hbs]
	for _, cp := range []wire.Capability{{}, or.Cap} {
		if err := mal.conn.Send(&wire.HintsDiscard{File: or.Attr.Ino, Index: 1, Version: or.Attr.Version,
			Stamp: time.Now().UnixNano(), Cap: cp, Data: poison}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the discards", func() bool { return scrape(t, sm).Sum("coopfs_hints_discard_offered_total", nil) >= 2 })
	r := newHintsAgent(t, addr, "hints", 64, "")
	r.mustRead(t, "f", data)
	if n := scrape(t, sm).Sum("coopfs_hints_discard_kept_total", nil); n != 0 {
		t.Errorf("the discard cache kept %v of the member's blocks", n)
	}
}

// A member forwards a "master copy" with bytes of its choosing to a client
// that holds the block already, and one it does not hold: neither enters
// its cache, and the client reads the export's bytes.
func TestAttackHintsForwardPlant(t *testing.T) {
	export := t.TempDir()
	data, other := pattern(2*hbs, 32), pattern(2*hbs, 36)
	writeExport(t, export, "f", data)
	writeExport(t, export, "g", other)
	addr := startPolicyServer(t, export, "hints", obs.NewMetrics(), 0)
	v := newHintsAgent(t, addr, "hints", 64, "")
	v.mustRead(t, "f", data) // f's blocks cached, g's not
	mal := newMember(t, addr)
	of, og := mal.open(t, "f"), mal.open(t, "g")
	// mal reads g's block from the server: its digest is known there, so
	// what is refused below is the wrong bytes.
	if _, err := mal.conn.Call(t.Context(), &wire.ReadBlock{Handle: og.Handle, File: og.Attr.Ino, Index: 1, Version: og.Attr.Version}); err != nil {
		t.Fatal(err)
	}
	peer := mal.dial(t, v.listen, wire.RolePeer, "mallory")
	planted := bytes.Repeat([]byte{0xee}, hbs)
	for _, or := range []*wire.OpenReply{of, og} {
		for _, cp := range []wire.Capability{{}, or.Cap} {
			r, err := peer.Call(t.Context(), &wire.HintsForward{File: or.Attr.Ino, Index: 1, Version: or.Attr.Version,
				Stamp: time.Now().UnixNano(), FromOldest: 1, From: 99, FromBoot: 1, Cap: cp, Data: planted})
			if err != nil {
				t.Fatal(err)
			}
			if ack := r.(*wire.HintsForwardAck); ack.Kept {
				t.Errorf("file %d: the client kept the planted copy (capability %v)", or.Attr.Ino, cp.Valid())
			}
		}
	}
	v.mustRead(t, "f", data)
	v.mustRead(t, "g", other)
}

// A member asks a holder for a block under `hints` with no capability, a
// forged one, another client's, another file's and another version's: it
// gets no block and no hint. With its own capability it gets the block —
// what it could read through the server.
func TestAttackHintsReadNeedsCapability(t *testing.T) {
	export := t.TempDir()
	data, other := pattern(2*hbs, 33), pattern(hbs, 34)
	writeExport(t, export, "f", data)
	writeExport(t, export, "g", other)
	addr := startPolicyServer(t, export, "hints", obs.NewMetrics(), 0)
	h := newHintsAgent(t, addr, "hints", 64, "")
	h.mustRead(t, "f", data)
	mal := newMember(t, addr)
	or, og := mal.open(t, "f"), mal.open(t, "g")
	alice := newMember(t, addr) // another client, whose capability mal has seen
	oa := alice.open(t, "f")
	_, forger, _ := ed25519.GenerateKey(nil)
	forged := wire.IssueCapability(forger, or.Attr.Ino, or.Attr.Version, mal.key.Public().(ed25519.PublicKey), time.Now())
	otherVersion := or.Cap
	otherVersion.Version++ // its signature no longer matches
	peer := mal.dial(t, h.listen, wire.RolePeer, "mallory")
	ask := func(cp wire.Capability) *wire.HintsBlock {
		t.Helper()
		r, err := peer.Call(t.Context(), &wire.HintsRead{File: or.Attr.Ino, Index: 1, Version: or.Attr.Version,
			Hops: 1, From: 99, FromBoot: 1, Cap: cp})
		if err != nil {
			t.Fatal(err)
		}
		return r.(*wire.HintsBlock)
	}
	for name, cp := range map[string]wire.Capability{"none": {}, "forged": forged, "another client's": oa.Cap,
		"another file's": og.Cap, "another version's": otherVersion} {
		if hb := ask(cp); hb.Kind != wire.HintsServer || len(hb.Data) != 0 {
			t.Errorf("capability %s: the holder answered kind %d with %d bytes, want \"ask the server\"", name, hb.Kind, len(hb.Data))
		}
	}
	if hb := ask(or.Cap); hb.Kind != wire.HintsHere || !bytes.Equal(hb.Data, data[hbs:]) {
		t.Errorf("own capability: kind %d, %d bytes; want the block", hb.Kind, len(hb.Data))
	}
}

// The same under `wholefile`: a segment is served only against the
// requester's own capability for the file and version.
func TestAttackWholeFileReadNeedsCapability(t *testing.T) {
	data := pattern(3*hbs, 35)
	addr, export, _ := wholeServer(t, data)
	writeExport(t, export, "g", data[:hbs])
	h := newWholeAgent(t, addr, t.TempDir(), "")
	h.mustRead(t, "f", data)
	mal := newMember(t, addr)
	or, og := mal.open(t, "f"), mal.open(t, "g")
	alice := newMember(t, addr)
	oa := alice.open(t, "f")
	peer := mal.dial(t, h.listen, wire.RolePeer, "mallory")
	ask := func(cp wire.Capability) (*wire.WholeData, error) {
		t.Helper()
		var r wire.Msg
		var err error
		// The holder's copy may still be on its way to its disk tier.
		waitFor(t, "the holder", func() bool {
			r, err = peer.Call(t.Context(), &wire.WholeRead{File: or.Attr.Ino, Version: or.Attr.Version, Count: 3, Cap: cp})
			return !errors.Is(err, syscall.ENOENT)
		})
		if err != nil {
			return nil, err
		}
		return r.(*wire.WholeData), nil
	}
	for name, cp := range map[string]wire.Capability{"none": {}, "another client's": oa.Cap, "another file's": og.Cap} {
		if wd, err := ask(cp); !errors.Is(err, syscall.EACCES) {
			t.Errorf("capability %s: got %v, %v; want EACCES", name, wd != nil, err)
		}
	}
	if wd, err := ask(or.Cap); err != nil || !bytes.Equal(wd.Data, data) {
		t.Errorf("own capability: %v; want the file", err)
	}
}

// A member starts a cluster warm-up naming every client: a mount that did
// not ask to take part (no WarmupAccept) reads nothing for it.
func TestAttackWarmupMakesOthersRead(t *testing.T) {
	export := t.TempDir()
	data := pattern(8*hbs, 37)
	writeExport(t, export, "f", data)
	addr := startPolicyServer(t, export, "hints", obs.NewMetrics(), 0)
	m := obs.NewMetrics()
	victim, err := agent.New(asRoot(), agent.Config{Server: addr, Policy: "hints", Metrics: m, Listen: freeAddr(t),
		ReconnectTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { victim.Close() })
	mal := newMember(t, addr)
	r, err := mal.conn.Call(t.Context(), &wire.WarmupStart{Items: []wire.WarmupItem{{Path: "f", Len: uint64(len(data)), Size: uint64(len(data))}}})
	if err != nil {
		t.Fatal(err)
	}
	job := r.(*wire.WarmupStarted).Job
	// The job names both; the victim refuses its share and leaves it (the
	// member, which never reports, holds the job open).
	waitFor(t, "the victim to leave the job", func() bool {
		r, err := mal.conn.Call(t.Context(), &wire.WarmupStatus{Job: job})
		return err == nil && len(r.(*wire.WarmupState).Names) == 1
	})
	read := scrape(t, m).Sum(obs.MetricReads, nil)
	if read != 0 {
		t.Errorf("the mount read %v bytes for another member's warm-up it did not accept", read)
	}
}
