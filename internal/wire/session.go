package wire

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/binary"
)

// Sessions (as NFSv4.1's): the server names each client's exactly-once
// state with a session id it issues in Welcome to an authenticated
// connection. A client that reconnects presents it in Hello.Session and
// resumes the session; anything else gets a new one. An id is
//
//	random (16 bytes) | HMAC-SHA256(session key, random | peer certificate name)[:16]
//
// so it is unguessable (the random half never leaves the TLS connection it
// was issued on) and bound to the certificate that authenticated the
// connection: an id presented over a connection of another certificate,
// or made up, is not resumed. The session key outlives the server process
// (a client resumes its session after a server restart, so an append the
// server recorded before it is not applied twice): with certificates it
// is derived from the server's private key, which no member holds; with
// the secret, from the secret. A member that holds the secret can then
// make ids of its own, but only with random halves it chose: it cannot
// name another client's session without that client's random half.

// SessionIDSize is the length of a session id.
const SessionIDSize = 32

const sessionLabel = "coopfs session id v1"

// sessionKey is the key session ids are made with (see above).
func (s *Security) sessionKey() []byte {
	mac := hmac.New(sha256.New, s.secret)
	if s.ca != nil {
		if der, err := x509.MarshalPKCS8PrivateKey(s.cert.PrivateKey); err == nil {
			mac = hmac.New(sha256.New, der)
		}
	}
	mac.Write([]byte(sessionLabel))
	return mac.Sum(nil)
}

func (s *Security) sessionMAC(random []byte, cert string) []byte {
	mac := hmac.New(sha256.New, s.sessionKey())
	mac.Write(random)
	mac.Write([]byte(cert))
	return mac.Sum(nil)[:SessionIDSize/2]
}

// Session returns the session of a connection authenticated as cert (its
// peer certificate's name, "" without certificates) that presented
// presented: the same id when this server (or one with the same key)
// issued it to that certificate, else a new one; resumed says which.
func (s *Security) Session(presented []byte, cert string) (id []byte, resumed bool) {
	if len(presented) == SessionIDSize {
		half := presented[:SessionIDSize/2]
		if hmac.Equal(presented[SessionIDSize/2:], s.sessionMAC(half, cert)) {
			return presented, true
		}
	}
	id = make([]byte, SessionIDSize)
	rand.Read(id[:SessionIDSize/2]) // never fails on Linux
	copy(id[SessionIDSize/2:], s.sessionMAC(id[:SessionIDSize/2], cert))
	return id, false
}

// SessionKey is the 64-bit name of a session in the server's reply cache
// and records: the first bytes of the id's SHA-256, which tell nothing of
// the id.
func SessionKey(id []byte) uint64 {
	d := sha256.Sum256(id)
	return binary.LittleEndian.Uint64(d[:8])
}
