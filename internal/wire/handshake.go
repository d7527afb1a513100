package wire

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"time"
)

// Handshake errors.
var (
	ErrAuth    = errors.New("authentication failed: the cluster secrets differ (check --secret-file on both ends)")
	ErrVersion = errors.New("protocol version mismatch: run the same coopfs release on both ends")
)

// HandshakeTimeout bounds the whole handshake.
const HandshakeTimeout = 10 * time.Second

const nonceSize = 32

func proof(secret []byte, who string, clientNonce, serverNonce []byte) []byte {
	if len(secret) == 0 {
		return nil
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(who))
	mac.Write(clientNonce)
	mac.Write(serverNonce)
	return mac.Sum(nil)
}

func newNonce() []byte {
	n := make([]byte, nonceSize)
	rand.Read(n) // never fails on Linux
	return n
}

// handshakeIO reads and writes single frames before the mux runs.
type handshakeIO struct {
	nc  net.Conn
	br  *bufio.Reader
	hdr []byte
}

func (h *handshakeIO) send(m Msg, flags uint8) error {
	head, data := appendFrame(nil, m, flags, 0)
	_, err := (&net.Buffers{head, data}).WriteTo(h.nc)
	return err
}

func (h *handshakeIO) recv() (Msg, error) {
	lim := Limits{MaxMeta: 4096, MaxData: 0}
	_, m, err := readFrame(h.br, h.hdr, lim)
	if err != nil {
		return nil, err
	}
	if e, ok := m.(*Error); ok {
		return nil, &RemoteError{Errno: errnoValue(e.Errno), Msg: e.Msg}
	}
	return m, nil
}

func expect[T Msg](h *handshakeIO) (T, error) {
	var zero T
	m, err := h.recv()
	if err != nil {
		return zero, err
	}
	t, ok := m.(T)
	if !ok {
		return zero, fmt.Errorf("%w: handshake got %v", ErrMalformed, m.Type())
	}
	return t, nil
}

// ClientHandshake runs the dialer's side on nc: it sends hello (Nonce and
// Version are filled in), checks the server's proof and proves the secret.
// It returns the reader to pass to NewConn.
func ClientHandshake(ctx context.Context, nc net.Conn, secret []byte, hello Hello) (*bufio.Reader, *HelloReply, *Welcome, error) {
	deadline := time.Now().Add(HandshakeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	nc.SetDeadline(deadline)
	defer nc.SetDeadline(time.Time{})
	h := &handshakeIO{nc: nc, br: bufio.NewReaderSize(nc, 64<<10), hdr: make([]byte, HeaderSize)}
	hello.Version = ProtocolVersion
	hello.Nonce = newNonce()
	if err := h.send(&hello, 0); err != nil {
		return nil, nil, nil, fmt.Errorf("send hello: %w", err)
	}
	hr, err := expect[*HelloReply](h)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("handshake: %w", err)
	}
	if hr.Version != ProtocolVersion {
		return nil, nil, nil, fmt.Errorf("%w (server speaks %d, we speak %d)", ErrVersion, hr.Version, ProtocolVersion)
	}
	// Prove our secret before checking the server's, so that a mismatch is
	// seen (and logged) on both ends.
	if err := h.send(&Auth{Proof: proof(secret, "coopfs-client", hello.Nonce, hr.Nonce)}, 0); err != nil {
		return nil, nil, nil, fmt.Errorf("send auth: %w", err)
	}
	if !hmac.Equal(proof(secret, "coopfs-server", hello.Nonce, hr.Nonce), hr.Proof) {
		return nil, nil, nil, fmt.Errorf("server's proof: %w", ErrAuth)
	}
	w, err := expect[*Welcome](h)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("handshake: %w", err)
	}
	return h.br, hr, w, nil
}

// ServerHandshake runs the accepting side: it reads Hello, answers with
// reply (Version, Nonce and Proof are filled in), checks the dialer's proof
// and sends welcome(hello). A dialer with the wrong secret is told so and
// gets ErrAuth back here as well.
func ServerHandshake(nc net.Conn, secret []byte, reply HelloReply, welcome func(*Hello) (Welcome, error)) (*bufio.Reader, *Hello, error) {
	nc.SetDeadline(time.Now().Add(HandshakeTimeout))
	defer nc.SetDeadline(time.Time{})
	h := &handshakeIO{nc: nc, br: bufio.NewReaderSize(nc, 64<<10), hdr: make([]byte, HeaderSize)}
	hello, err := expect[*Hello](h)
	if err != nil {
		return nil, nil, fmt.Errorf("handshake: %w", err)
	}
	if hello.Version != ProtocolVersion {
		h.send(errorMsg(ErrVersion), FlagReply)
		return nil, hello, fmt.Errorf("%w (dialer speaks %d)", ErrVersion, hello.Version)
	}
	if len(hello.Nonce) != nonceSize {
		return nil, hello, fmt.Errorf("%w: nonce of %d bytes", ErrMalformed, len(hello.Nonce))
	}
	reply.Version = ProtocolVersion
	reply.Nonce = newNonce()
	reply.Proof = proof(secret, "coopfs-server", hello.Nonce, reply.Nonce)
	if err := h.send(&reply, FlagReply); err != nil {
		return nil, hello, fmt.Errorf("send hello reply: %w", err)
	}
	auth, err := expect[*Auth](h)
	if err != nil {
		return nil, hello, fmt.Errorf("handshake: %w", err)
	}
	if !hmac.Equal(auth.Proof, proof(secret, "coopfs-client", hello.Nonce, reply.Nonce)) {
		h.send(&Error{Errno: 13, Msg: ErrAuth.Error()}, FlagReply)
		return nil, hello, ErrAuth
	}
	w, err := welcome(hello)
	if err != nil {
		h.send(errorMsg(err), FlagReply)
		return nil, hello, err
	}
	if err := h.send(&w, FlagReply); err != nil {
		return nil, hello, fmt.Errorf("send welcome: %w", err)
	}
	return h.br, hello, nil
}
