package wire

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"
)

// Handshake errors.
var (
	ErrAuth    = errors.New("authentication failed: the cluster secrets differ (check --secret-file on both ends)")
	ErrVersion = errors.New("protocol version mismatch: run the same coopfs release on both ends")
)

// HandshakeTimeout bounds the whole handshake, TLS included: a half-open or
// slow dialer is dropped after it.
const HandshakeTimeout = 10 * time.Second

// FirstByteTimeout bounds how long a listener waits for a dialer's first
// byte: a dialer sends its TLS ClientHello or Hello at once, and a silent
// connection holds a handshake slot (ConnLimits.MaxUnauth) only this long.
const FirstByteTimeout = 2 * time.Second

const nonceSize = 32

// exporterLabel names the keying material the secret proofs are bound to.
const exporterLabel = "EXPORTER-coopfs-secret-binding-v2"

// Handshake is the outcome of a handshake: the connection to hand to
// NewConn (TLS or plain) with its reader, and what each end said.
type Handshake struct {
	Conn     net.Conn
	Reader   *bufio.Reader
	Hello    *Hello
	Reply    *HelloReply
	Welcome  *Welcome
	PeerCert string // the common name of the other end's verified certificate, "" if none
	// PeerKey is the identity key the other end proved it holds (it
	// signed this handshake's transcript with it), nil if it showed none.
	PeerKey ed25519.PublicKey
}

// transcript is what the secret proofs cover: the session binding (TLS
// exported keying material, or both nonces in plaintext), the Hello and the
// HelloReply (without its proof for the listener's proof).
type transcript struct {
	binding []byte
	hello   []byte
	reply   []byte
}

func encodeMeta(m Msg) []byte {
	head, _ := appendFrame(nil, m, 0, 0)
	return head[HeaderSize:]
}

func newTranscript(nc net.Conn, hello *Hello, reply *HelloReply) (*transcript, error) {
	t := &transcript{hello: encodeMeta(hello)}
	r := *reply
	r.Proof = nil
	t.reply = encodeMeta(&r)
	if tc, ok := nc.(*tls.Conn); ok {
		cs := tc.ConnectionState()
		ekm, err := cs.ExportKeyingMaterial(exporterLabel, nil, 32)
		if err != nil {
			return nil, fmt.Errorf("export keying material: %w", err)
		}
		t.binding = ekm
	} else {
		t.binding = append(append([]byte(nil), hello.Nonce...), reply.Nonce...)
	}
	return t, nil
}

// proof is HMAC-SHA256(secret, label | binding | Hello | HelloReply (| listener proof)).
func (t *transcript) proof(secret []byte, label string, extra []byte) []byte {
	if len(secret) == 0 {
		return nil
	}
	mac := hmac.New(sha256.New, secret)
	for _, p := range [][]byte{[]byte(label), t.binding, t.hello, t.reply, extra} {
		var n [4]byte
		n[0], n[1], n[2], n[3] = byte(len(p)>>24), byte(len(p)>>16), byte(len(p)>>8), byte(len(p))
		mac.Write(n[:])
		mac.Write(p)
	}
	return mac.Sum(nil)
}

const (
	labelListener = "coopfs listener proof v2"
	labelDialer   = "coopfs dialer proof v2"

	labelListenerID = "coopfs listener identity v1"
	labelDialerID   = "coopfs dialer identity v1"
)

// signed is what an identity signature covers: the label, the session
// binding, the Hello and the HelloReply. The binding is unique to this TLS
// session, so a signature cannot be replayed on another connection.
func (t *transcript) signed(label string) []byte {
	var b []byte
	for _, p := range [][]byte{[]byte(label), t.binding, t.hello, t.reply} {
		b = binary.BigEndian.AppendUint32(b, uint32(len(p)))
		b = append(b, p...)
	}
	return b
}

// identify signs the transcript with id (nil: no identity shown).
func (t *transcript) identify(id ed25519.PrivateKey, label string) (key, sig []byte) {
	if id == nil {
		return nil, nil
	}
	return id.Public().(ed25519.PublicKey), ed25519.Sign(id, t.signed(label))
}

// verifyIdentity checks an identity the other end showed: nil and no
// error when it showed none.
func (t *transcript) verifyIdentity(key, sig []byte, label string) (ed25519.PublicKey, error) {
	if len(key) == 0 && len(sig) == 0 {
		return nil, nil
	}
	if len(key) != ed25519.PublicKeySize || !ed25519.Verify(key, t.signed(label), sig) {
		return nil, fmt.Errorf("%w: the other end's identity signature does not verify", ErrAuth)
	}
	return ed25519.PublicKey(key), nil
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

func newHandshakeIO(nc net.Conn) *handshakeIO {
	return &handshakeIO{nc: nc, br: bufio.NewReaderSize(nc, 64<<10), hdr: make([]byte, HeaderSize)}
}

func (h *handshakeIO) send(m Msg, flags uint8) error {
	head, data := appendFrame(nil, m, flags, 0)
	_, err := (&net.Buffers{head, data}).WriteTo(h.nc)
	return err
}

// handshakeLimits bound what a handshake frame may make us allocate.
var handshakeLimits = Limits{MaxMeta: 4096, MaxData: 0}

func (h *handshakeIO) recv() (Msg, error) {
	_, m, err := readFrame(h.br, h.hdr, handshakeLimits)
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

// ClientHandshake runs the dialer's side on nc: TLS (unless insecure),
// then Hello (Nonce and Version are filled in). It checks the listener's
// proof of the secret before it sends its own, so a relay learns nothing
// it could replay. serverName is the name the listener's certificate must
// carry (certificate mode). On success nc belongs to the Handshake's Conn.
func ClientHandshake(ctx context.Context, nc net.Conn, sec *Security, serverName string, hello Hello) (*Handshake, error) {
	return ClientHandshakeAs(ctx, nc, sec, serverName, hello, nil)
}

// ClientHandshakeAs is ClientHandshake proving identity key id (nil: none)
// to the listener, which capabilities can then name.
func ClientHandshakeAs(ctx context.Context, nc net.Conn, sec *Security, serverName string, hello Hello, id ed25519.PrivateKey) (*Handshake, error) {
	deadline := time.Now().Add(HandshakeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	nc.SetDeadline(deadline)
	defer nc.SetDeadline(time.Time{})
	hs, err := clientTransport(ctx, nc, sec, serverName)
	if err != nil {
		return nil, err
	}
	h := newHandshakeIO(hs.Conn)
	hello.Version = ProtocolVersion
	hello.Nonce = newNonce()
	if err := h.send(&hello, 0); err != nil {
		return nil, fmt.Errorf("send hello: %w", err)
	}
	hr, err := expect[*HelloReply](h)
	if err != nil {
		if sec.TLS() && strings.Contains(err.Error(), "remote error: tls:") {
			// TLS 1.3: the listener checks our certificate after our
			// side of the TLS handshake is done; its refusal comes here.
			return nil, friendlyTLSError(err)
		}
		return nil, fmt.Errorf("handshake: %w", err)
	}
	if hr.Version != ProtocolVersion {
		return nil, fmt.Errorf("%w (the other end speaks %d, we speak %d)", ErrVersion, hr.Version, ProtocolVersion)
	}
	t, err := newTranscript(hs.Conn, &hello, hr)
	if err != nil {
		return nil, err
	}
	if !hmac.Equal(t.proof(sec.secret, labelListener, nil), hr.Proof) {
		// Tell the listener why we hang up, without a proof of our own.
		h.send(&Error{Errno: uint32(syscall.EACCES), Msg: ErrAuth.Error()}, 0)
		return nil, fmt.Errorf("the listener's proof: %w", ErrAuth)
	}
	auth := &Auth{Proof: t.proof(sec.secret, labelDialer, hr.Proof)}
	auth.IDKey, auth.IDSig = t.identify(id, labelDialerID)
	if err := h.send(auth, 0); err != nil {
		return nil, fmt.Errorf("send auth: %w", err)
	}
	w, err := expect[*Welcome](h)
	if err != nil {
		var re *RemoteError
		if errors.As(err, &re) && re.Errno == syscall.EACCES && re.Msg == ErrAuth.Error() {
			return nil, ErrAuth
		}
		return nil, fmt.Errorf("handshake: %w", err)
	}
	if hs.PeerKey, err = t.verifyIdentity(w.IDKey, w.IDSig, labelListenerID); err != nil {
		return nil, err
	}
	hs.Reader, hs.Hello, hs.Reply, hs.Welcome = h.br, &hello, hr, w
	return hs, nil
}

// clientTransport runs the dialer's TLS handshake (unless insecure).
func clientTransport(ctx context.Context, nc net.Conn, sec *Security, serverName string) (*Handshake, error) {
	hs := &Handshake{Conn: nc}
	if !sec.TLS() {
		return hs, nil
	}
	tc := tls.Client(newBufferedConn(nc), sec.clientTLS(serverName))
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, friendlyTLSError(err)
	}
	hs.Conn = tc
	if pc := tc.ConnectionState().PeerCertificates; sec.ca != nil && len(pc) > 0 {
		hs.PeerCert = pc[0].Subject.CommonName
	}
	return hs, nil
}

// ServerHandshake runs the accepting side: TLS (unless insecure), Hello,
// the reply (Version, Nonce and Proof are filled in), the dialer's proof,
// then welcome, which sees the Handshake so far (Hello and PeerCert set).
// A dialer with the wrong secret is told so and gets ErrAuth back here as
// well. On error the Handshake, if not nil, holds the Hello for logs.
func ServerHandshake(nc net.Conn, sec *Security, reply HelloReply, welcome func(*Handshake) (Welcome, error)) (*Handshake, error) {
	return ServerHandshakeAs(nc, sec, reply, nil, welcome)
}

// ServerHandshakeAs is ServerHandshake proving identity key id (nil: none)
// in the Welcome; the dialer's identity, if it showed one, is verified
// before welcome is called (Handshake.PeerKey).
func ServerHandshakeAs(nc net.Conn, sec *Security, reply HelloReply, id ed25519.PrivateKey, welcome func(*Handshake) (Welcome, error)) (*Handshake, error) {
	nc.SetDeadline(time.Now().Add(HandshakeTimeout))
	defer nc.SetDeadline(time.Time{})
	conn, err := serverTransport(nc, sec)
	if err != nil {
		return nil, err
	}
	hs := &Handshake{Conn: conn}
	if tc, ok := conn.(*tls.Conn); ok && sec.ca != nil {
		if pc := tc.ConnectionState().PeerCertificates; len(pc) > 0 {
			hs.PeerCert = pc[0].Subject.CommonName
		}
	}
	h := newHandshakeIO(conn)
	hello, err := readHello(h, sec, nc)
	hs.Hello = hello
	if err != nil {
		return hs, err
	}
	reply.Version = ProtocolVersion
	reply.Nonce = newNonce()
	t, err := newTranscript(conn, hello, &reply)
	if err != nil {
		return hs, err
	}
	reply.Proof = t.proof(sec.secret, labelListener, nil)
	if err := h.send(&reply, FlagReply); err != nil {
		return hs, fmt.Errorf("send hello reply: %w", err)
	}
	auth, err := expect[*Auth](h)
	if err != nil {
		var re *RemoteError
		if errors.As(err, &re) && re.Errno == syscall.EACCES {
			return hs, fmt.Errorf("the dialer rejected our proof: %w", ErrAuth)
		}
		return hs, fmt.Errorf("handshake: %w", err)
	}
	if !hmac.Equal(auth.Proof, t.proof(sec.secret, labelDialer, reply.Proof)) {
		h.send(&Error{Errno: uint32(syscall.EACCES), Msg: ErrAuth.Error()}, FlagReply)
		return hs, ErrAuth
	}
	if hs.PeerKey, err = t.verifyIdentity(auth.IDKey, auth.IDSig, labelDialerID); err != nil {
		h.send(&Error{Errno: uint32(syscall.EACCES), Msg: err.Error()}, FlagReply)
		return hs, err
	}
	w, err := welcome(hs)
	if err != nil {
		h.send(errorMsg(err), FlagReply)
		return hs, err
	}
	w.IDKey, w.IDSig = t.identify(id, labelListenerID)
	if err := h.send(&w, FlagReply); err != nil {
		return hs, fmt.Errorf("send welcome: %w", err)
	}
	hs.Reader, hs.Reply, hs.Welcome = h.br, &reply, &w
	return hs, nil
}

// readHello reads and checks the dialer's Hello; the Hello is returned
// (for logs) with an error too when one was read.
func readHello(h *handshakeIO, sec *Security, nc net.Conn) (*Hello, error) {
	hello, err := expect[*Hello](h)
	if err != nil {
		return nil, fmt.Errorf("handshake: %w", err)
	}
	if hello.Version != ProtocolVersion {
		h.send(errorMsg(ErrVersion), FlagReply)
		return hello, fmt.Errorf("%w (dialer speaks %d)", ErrVersion, hello.Version)
	}
	if len(hello.Nonce) != nonceSize {
		return hello, fmt.Errorf("%w: nonce of %d bytes", ErrMalformed, len(hello.Nonce))
	}
	if !sec.Authenticates() && !isLoopback(nc) {
		err := fmt.Errorf("this end has no secret and no certificates and only accepts loopback peers: %w", syscall.EACCES)
		h.send(errorMsg(err), FlagReply)
		return hello, err
	}
	return hello, nil
}

// serverTransport reads the dialer's first byte to tell a TLS ClientHello
// from a plaintext frame, refuses the mode this end does not run with a
// clear message, and runs the TLS handshake.
func serverTransport(nc net.Conn, sec *Security) (net.Conn, error) {
	var first [1]byte
	deadline := time.Now().Add(HandshakeTimeout)
	nc.SetReadDeadline(time.Now().Add(FirstByteTimeout))
	if _, err := io.ReadFull(nc, first[:]); err != nil {
		return nil, fmt.Errorf("handshake: no first byte within %s: %w", FirstByteTimeout, err)
	}
	nc.SetReadDeadline(deadline)
	pc := &peekedConn{Conn: nc, first: first[:]}
	isTLS := first[0] == tlsRecordHandshake
	switch {
	case !sec.TLS() && isTLS:
		return nil, fmt.Errorf("%w: the dialer speaks TLS but this end runs with --insecure", ErrMode)
	case !sec.TLS():
		return pc, nil
	case !isTLS:
		msg := fmt.Sprintf("%v: this end requires TLS; the dialer runs with --insecure (drop it, and give the secret or certificates)", ErrMode)
		(&handshakeIO{nc: nc}).send(&Error{Errno: uint32(syscall.EPROTO), Msg: msg}, FlagReply)
		return nil, errors.New(msg)
	}
	tc := tls.Server(newBufferedConn(pc), sec.serverTLS())
	if err := tc.Handshake(); err != nil {
		return nil, fmt.Errorf("TLS handshake: %w", err)
	}
	return tc, nil
}

func isLoopback(nc net.Conn) bool {
	a, ok := nc.RemoteAddr().(*net.TCPAddr)
	return ok && a.IP.IsLoopback()
}
