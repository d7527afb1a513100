package wire

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"net"
	"testing"
	"time"
)

// A capability is accepted only for its file and version, for the client
// it names, unexpired, and signed with the server's key; a verified
// signature is remembered, and a new server key forgets it.
func TestCapabilityCheck(t *testing.T) {
	pub, key, _ := ed25519.GenerateKey(nil)
	alice, _, _ := ed25519.GenerateKey(nil)
	bob, _, _ := ed25519.GenerateKey(nil)
	_, forger, _ := ed25519.GenerateKey(nil)
	now := time.Now()
	var v CapVerifier
	v.SetKey(pub)
	good := IssueCapability(key, 7, 3, alice, now)
	tampered := good
	tampered.Expiry += int64(time.Hour)
	cases := []struct {
		name          string
		c             Capability
		file, version uint64
		client        []byte
		at            time.Time
		ok            bool
	}{
		{"valid", good, 7, 3, alice, now, true},
		{"none", Capability{}, 7, 3, alice, now, false},
		{"forged", IssueCapability(forger, 7, 3, alice, now), 7, 3, alice, now, false},
		{"another client's", good, 7, 3, bob, now, false},
		{"another file's", good, 8, 3, alice, now, false},
		{"another version's", good, 7, 4, alice, now, false},
		{"expired", good, 7, 3, alice, now.Add(CapabilityLifetime + time.Second), false},
		{"tampered expiry", tampered, 7, 3, alice, now, false},
		{"provenance (no client)", good, 7, 3, nil, now.Add(2 * CapabilityLifetime), true},
	}
	for _, c := range cases {
		err := v.Check(&c.c, c.file, c.version, c.client, c.at)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrCapability)) {
			t.Errorf("%s: %v, want ok=%v", c.name, err, c.ok)
		}
	}
	other, _, _ := ed25519.GenerateKey(nil)
	v.SetKey(other) // a restarted server
	if err := v.Check(&good, 7, 3, alice, now); err == nil {
		t.Error("a capability of the old server key is accepted after the key changed")
	}
}

// Capabilities travel in the messages and survive encoding.
func TestCapabilityEncoding(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(nil)
	alice, _, _ := ed25519.GenerateKey(nil)
	c := IssueCapability(key, 1, 2, alice, time.Now())
	m := roundTrip(t, &HintsRead{File: 1, Index: 2, Version: 2, Cap: c}).(*HintsRead)
	var v CapVerifier
	v.SetKey(key.Public().(ed25519.PublicKey))
	if err := v.Check(&m.Cap, 1, 2, alice, time.Now()); err != nil {
		t.Fatal(err)
	}
}

// Each end proves its identity key by signing this session's transcript:
// the other end learns the key (Handshake.PeerKey). A signature made for
// another session (replayed) does not verify.
func TestHandshakeIdentity(t *testing.T) {
	sec := withTLS("a cluster secret of more than 128 bits")
	_, dk, _ := ed25519.GenerateKey(nil)
	_, lk, _ := ed25519.GenerateKey(nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan *Handshake, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		hs, _ := ServerHandshakeAs(nc, sec, HelloReply{BlockSize: 4096, Policy: "none"}, lk,
			func(*Handshake) (Welcome, error) { return Welcome{}, nil })
		got <- hs
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	ch, err := ClientHandshakeAs(t.Context(), nc, sec, "", Hello{Role: RolePeer, Name: "d"}, dk)
	if err != nil {
		t.Fatal(err)
	}
	sh := <-got
	if sh == nil || !bytes.Equal(sh.PeerKey, dk.Public().(ed25519.PublicKey)) {
		t.Fatalf("the listener learnt %x, want the dialer's key", sh.PeerKey)
	}
	if !bytes.Equal(ch.PeerKey, lk.Public().(ed25519.PublicKey)) {
		t.Fatalf("the dialer learnt %x, want the listener's key", ch.PeerKey)
	}
	other := &transcript{binding: []byte("another session"), hello: []byte("h"), reply: []byte("r")}
	key, sig := other.identify(dk, labelDialerID)
	this := &transcript{binding: []byte("this session"), hello: []byte("h"), reply: []byte("r")}
	if _, err := this.verifyIdentity(key, sig, labelDialerID); !errors.Is(err, ErrAuth) {
		t.Fatalf("a replayed identity signature: %v, want ErrAuth", err)
	}
}
