package wire

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"strings"
	"time"
)

// SecurityConfig says how a process protects its connections. Exactly one
// of these holds:
//   - Secret set: TLS 1.3, each end proves the secret by an HMAC over the
//     TLS session's exported keying material (RFC 8446 §7.5);
//   - CertFile, KeyFile and CAFile set: TLS 1.3 with certificates of the
//     cluster CA, verified on both ends (a secret may be added on top);
//   - Insecure: plaintext frames; a secret, if given, still authenticates
//     the handshake (over nonces) but nothing after it, and without one
//     only loopback peers are accepted.
type SecurityConfig struct {
	Secret            []byte
	CertFile, KeyFile string // this process's certificate and key (PEM)
	CAFile            string // the cluster CA's certificate (PEM)
	Insecure          bool
}

func (c *SecurityConfig) validate() error {
	certs := c.CertFile != "" || c.KeyFile != "" || c.CAFile != ""
	if certs && (c.CertFile == "" || c.KeyFile == "" || c.CAFile == "") {
		return errors.New("--tls-cert, --tls-key and --tls-ca go together: give all three")
	}
	if c.Insecure && certs {
		return errors.New("--insecure turns TLS off: do not combine it with --tls-cert/--tls-key/--tls-ca")
	}
	if !c.Insecure && !certs && len(c.Secret) == 0 {
		return ErrNoCredentials
	}
	return nil
}

// ErrNoCredentials is a process started with neither a secret nor certificates.
var ErrNoCredentials = errors.New("no credentials: give --secret-file FILE (make one with `coopfs secret FILE`) " +
	"or --tls-cert/--tls-key/--tls-ca (see `coopfs ca`); --insecure runs without encryption")

// MinSecretBytes is the shortest cluster secret the commands accept (128 bits).
const MinSecretBytes = 16

// Security is the loaded form of a SecurityConfig, shared by every
// connection of a process. It is read-only after NewSecurity.
type Security struct {
	secret   []byte
	insecure bool
	cert     tls.Certificate // own certificate: the CA's, or an ephemeral self-signed one
	ca       *x509.CertPool  // nil: certificates are not checked (secret mode)
}

// NewSecurity loads certificates (or makes the ephemeral one the secret
// mode presents) and checks that the configuration is complete.
func NewSecurity(cfg SecurityConfig) (*Security, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Security{secret: cfg.Secret, insecure: cfg.Insecure}
	switch {
	case cfg.Insecure:
	case cfg.CAFile != "":
		cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("load --tls-cert %s / --tls-key %s: %w", cfg.CertFile, cfg.KeyFile, err)
		}
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read --tls-ca: %w", err)
		}
		s.ca = x509.NewCertPool()
		if !s.ca.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca %s holds no PEM certificate", cfg.CAFile)
		}
		s.cert = cert
	default:
		cert, err := ephemeralCert()
		if err != nil {
			return nil, err
		}
		s.cert = cert
	}
	return s, nil
}

// MustSecurity is NewSecurity for configurations known to be complete
// (tests, in-process defaults); it panics on an error.
func MustSecurity(cfg SecurityConfig) *Security {
	s, err := NewSecurity(cfg)
	if err != nil {
		panic(err)
	}
	return s
}

// TLS reports whether connections are encrypted.
func (s *Security) TLS() bool { return !s.insecure }

// Authenticates reports whether peers must prove a secret or a certificate;
// when false (--insecure without a secret) only loopback peers are accepted.
func (s *Security) Authenticates() bool { return len(s.secret) > 0 || s.ca != nil }

// Mode names the protection for logs: "tls+certificates", "tls+secret",
// "insecure+secret" or "insecure".
func (s *Security) Mode() string {
	switch {
	case s.insecure && len(s.secret) > 0:
		return "insecure+secret"
	case s.insecure:
		return "insecure"
	case s.ca != nil:
		return "tls+certificates"
	default:
		return "tls+secret"
	}
}

// Both ends send full 16 KiB records from the first byte
// (DynamicRecordSizingDisabled): crypto/tls otherwise starts each
// connection with ~1 KiB records, which help a browser render early and
// here only cost a seal and a header per kilobyte of the first blocks.
func (s *Security) serverTLS() *tls.Config {
	c := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{s.cert}, DynamicRecordSizingDisabled: true}
	if s.ca != nil {
		c.ClientAuth, c.ClientCAs = tls.RequireAndVerifyClientCert, s.ca
	}
	return c
}

// clientTLS checks the listener's certificate against the CA and the
// name it was dialed by; in secret mode the listener's certificate is not
// checked (the secret proofs bound to the session authenticate it).
func (s *Security) clientTLS(serverName string) *tls.Config {
	c := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{s.cert}, DynamicRecordSizingDisabled: true}
	if s.ca != nil {
		c.RootCAs, c.ServerName = s.ca, serverName
	} else {
		c.InsecureSkipVerify = true
	}
	return c
}

// ephemeralCert makes the self-signed certificate a secret-mode listener
// presents: TLS 1.3 needs one, and nobody checks it.
func ephemeralCert() (tls.Certificate, error) {
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("ephemeral key: %w", err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "coopfs ephemeral"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("ephemeral certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// peekedConn is a net.Conn whose first byte was read to tell TLS from
// plaintext; Read hands that byte back first.
type peekedConn struct {
	net.Conn
	first []byte
}

func (c *peekedConn) Read(p []byte) (int, error) {
	if len(c.first) > 0 && len(p) > 0 {
		p[0] = c.first[0]
		c.first = nil
		return 1, nil
	}
	return c.Conn.Read(p)
}

// NetConn returns the wrapped connection (for socket options).
func (c *peekedConn) NetConn() net.Conn { return c.Conn }

// tlsRecordHandshake is the first byte of a TLS ClientHello record.
const tlsRecordHandshake = 0x16

// tcpConn finds the TCP socket under TLS and peek wrappers.
func tcpConn(nc net.Conn) (*net.TCPConn, bool) {
	for {
		switch c := nc.(type) {
		case *net.TCPConn:
			return c, true
		case interface{ NetConn() net.Conn }:
			nc = c.NetConn()
		default:
			return nil, false
		}
	}
}

// friendlyTLSError turns the errors of a dialer that met a plaintext or
// closing listener into one line that says what to check.
func friendlyTLSError(err error) error {
	var rh tls.RecordHeaderError
	var cv *tls.CertificateVerificationError
	switch {
	case errors.As(err, &rh):
		return fmt.Errorf("%w: the other end does not speak TLS (is it running with --insecure? then both ends need it)", ErrMode)
	case errors.As(err, &cv):
		return &CertError{fmt.Errorf("the other end's certificate is refused (is it issued by --tls-ca for the name we dialed? see `coopfs ca issue --host`): %w", err)}
	case strings.Contains(err.Error(), "remote error: tls:"):
		return &CertError{fmt.Errorf("the other end refused our TLS handshake (check that --tls-cert is issued by the same CA as its --tls-ca, or that both ends use the secret): %w", err)}
	}
	return fmt.Errorf("TLS handshake: %w (if the other end runs with --insecure, both ends need it)", err)
}

// CertError is a TLS handshake that failed over certificates: retrying
// cannot help.
type CertError struct{ Err error }

func (e *CertError) Error() string { return e.Err.Error() }
func (e *CertError) Unwrap() error { return e.Err }

// Permanent reports whether a handshake error is one that retrying cannot
// fix: wrong credentials, a TLS/--insecure mismatch, another version.
func Permanent(err error) bool {
	var ce *CertError
	return errors.Is(err, ErrAuth) || errors.Is(err, ErrVersion) || errors.Is(err, ErrMode) || errors.As(err, &ce)
}

// ErrMode is a connection between an end that runs TLS and one that runs --insecure.
var ErrMode = errors.New("TLS/--insecure mismatch")
