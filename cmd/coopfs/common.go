package main

import (
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/coopfs/coopfs/internal/obs"
	"github.com/coopfs/coopfs/internal/server"
	"github.com/coopfs/coopfs/internal/wire"
)

// readSecret reads the cluster secret from a file ("" means none) and
// refuses one shorter than 128 bits.
func readSecret(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read --secret-file: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if err := checkSecret(s); err != nil {
		return nil, fmt.Errorf("--secret-file %s: %w; make a strong one with `coopfs secret %s`", path, err, path)
	}
	return []byte(s), nil
}

// checkSecret refuses secrets that may hold less than 128 bits: a secret
// is base64 of at least 16 bytes, or at least 32 characters (32 hex digits
// are 128 bits; `coopfs secret` writes 64).
func checkSecret(s string) error {
	if b, err := base64.StdEncoding.DecodeString(s); err == nil && len(b) >= wire.MinSecretBytes {
		return nil
	}
	if len(s) >= 2*wire.MinSecretBytes {
		return nil
	}
	return fmt.Errorf("the secret holds %d characters, which may be less than 128 bits; want at least %d characters (or base64 of %d bytes)",
		len(s), 2*wire.MinSecretBytes, wire.MinSecretBytes)
}

// securityFlags are the flags of every command that connects: the secret,
// the certificates, or --insecure.
type securityFlags struct {
	secretFile, cert, key, ca *string
	insecure                  *bool
}

func addSecurityFlags(fs *flag.FlagSet) *securityFlags {
	return &securityFlags{
		secretFile: fs.String("secret-file", "", "file holding the cluster secret (make one with `coopfs secret FILE`): TLS 1.3, both ends prove the secret"),
		cert:       fs.String("tls-cert", "", "this process's certificate (PEM) from the cluster CA (`coopfs ca issue`)"),
		key:        fs.String("tls-key", "", "the key of --tls-cert (PEM)"),
		ca:         fs.String("tls-ca", "", "the cluster CA's certificate (PEM): the other ends' certificates must be issued by it"),
		insecure:   fs.Bool("insecure", false, "no TLS: frames travel in plaintext, readable and changeable on the network (for tests and comparisons only)"),
	}
}

// load reads the secret and certificates; warn then says loudly when the
// connections will not be encrypted (after the other checks, so that a
// refusal stays one line).
func (f *securityFlags) load() (*wire.Security, error) {
	secret, err := readSecret(*f.secretFile)
	if err != nil {
		return nil, err
	}
	sec, err := wire.NewSecurity(wire.SecurityConfig{Secret: secret, CertFile: *f.cert, KeyFile: *f.key, CAFile: *f.ca, Insecure: *f.insecure})
	if err != nil {
		return nil, err
	}
	return sec, nil
}

// connFlags are the connection caps of a listener that clients dial
// (serve and proxy).
type connFlags struct {
	maxConns, maxPerAddr, maxHandshakes, maxHandshakesPerAddr *int
}

// addConnFlags defines --max-conns, --max-conns-per-addr, --max-handshakes
// and --max-handshakes-per-addr; who names the connections in their help ("client
// connections").
func addConnFlags(fs *flag.FlagSet, who string) connFlags {
	return connFlags{
		maxConns:      fs.Int("max-conns", wire.DefaultMaxConns, who+" accepted at once"),
		maxPerAddr:    fs.Int("max-conns-per-addr", wire.DefaultMaxPerAddr, who+" accepted at once from one IP address"),
		maxHandshakes: fs.Int("max-handshakes", wire.DefaultMaxUnauth, who+" still in their handshake (not yet authenticated) at once"),
		maxHandshakesPerAddr: fs.Int("max-handshakes-per-addr", wire.DefaultMaxUnauthPerAddr,
			who+" still in their handshake at once from one IP address (an IPv6 /64)"),
	}
}

func (c connFlags) limits() wire.ConnLimits {
	return wire.ConnLimits{MaxConns: *c.maxConns, MaxPerAddr: *c.maxPerAddr, MaxUnauth: *c.maxHandshakes,
		MaxUnauthPerAddr: *c.maxHandshakesPerAddr}
}

// checkListenSecurity refuses to listen beyond loopback without a secret,
// then warns loudly when the connections will not be encrypted.
func checkListenSecurity(sec *wire.Security, listen string, log *slog.Logger, stderr io.Writer) error {
	if !sec.Authenticates() && !server.IsLoopback(listen) {
		return fmt.Errorf("--insecure without a secret: refusing to listen on %s, which is not a loopback address; give --secret-file FILE (see `coopfs secret`) or listen on 127.0.0.1", listen)
	}
	warnInsecure(sec, log, stderr)
	return nil
}

func warnInsecure(sec *wire.Security, log *slog.Logger, stderr io.Writer) {
	if !sec.TLS() {
		fmt.Fprintln(stderr, "WARNING: --insecure: connections are NOT encrypted; anyone on the network path can read and change file data.")
		log.Warn("INSECURE: TLS is off; file data crosses the network in plaintext", "mode", sec.Mode())
	}
}

// serveMetrics serves /metrics on addr in the background when addr is set;
// a bind failure is returned at once.
func serveMetrics(ctx context.Context, m *obs.Metrics, addr string, log *slog.Logger) error {
	if addr == "" {
		return nil
	}
	ms, err := m.Listen(addr)
	if err != nil {
		return err
	}
	go func() {
		if err := ms.Serve(ctx); err != nil {
			log.Error("metrics server stopped", "err", err)
		}
	}()
	log.Info("serving metrics", "addr", "http://"+ms.Addr()+"/metrics")
	return nil
}
