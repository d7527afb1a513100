package wire

import (
	"bytes"
	"testing"
)

// A session id is resumed only by the certificate it was issued to, only
// as issued, and by a server with the same key.
func TestSessionBoundToCertificate(t *testing.T) {
	sec := MustSecurity(SecurityConfig{Secret: []byte("0123456789abcdef")})
	id, resumed := sec.Session(nil, "alice")
	if resumed || len(id) != SessionIDSize {
		t.Fatalf("new session: %x resumed=%v", id, resumed)
	}
	if again, ok := sec.Session(id, "alice"); !ok || !bytes.Equal(again, id) {
		t.Error("the certificate it was issued to does not resume it")
	}
	if other, ok := sec.Session(id, "mallory"); ok || bytes.Equal(other, id) {
		t.Error("another certificate resumes it")
	}
	bad := bytes.Clone(id)
	bad[0] ^= 1
	if _, ok := sec.Session(bad, "alice"); ok {
		t.Error("an altered id is resumed")
	}
	restarted := MustSecurity(SecurityConfig{Secret: []byte("0123456789abcdef")})
	if _, ok := restarted.Session(id, "alice"); !ok {
		t.Error("a restarted server with the same secret does not resume it")
	}
	if _, ok := MustSecurity(SecurityConfig{Secret: []byte("another cluster!")}).Session(id, "alice"); ok {
		t.Error("a server with another secret resumes it")
	}
}
