package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// credentials gives every process the same protection: a fresh cluster
// secret in the run directory (TLS), or --insecure when Config.Insecure,
// unless the caller's ServerArgs already choose credentials. It returns
// the flags for serve and mount and the secret (nil if none was made).
func (c *Cluster) credentials() (serve, mount []string, secret []byte, err error) {
	for _, a := range c.cfg.ServerArgs {
		for _, f := range []string{"--secret-file", "--tls-cert", "--insecure"} {
			if a == f || strings.HasPrefix(a, f+"=") {
				return nil, nil, nil, nil
			}
		}
	}
	if c.cfg.Insecure {
		return []string{"--insecure"}, []string{"--insecure"}, nil, nil
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, nil, nil, fmt.Errorf("cluster: secret: %w", err)
	}
	secret = []byte(hex.EncodeToString(b[:]))
	path := filepath.Join(c.dir, "secret")
	if err := os.WriteFile(path, append(secret, '\n'), 0o600); err != nil {
		return nil, nil, nil, fmt.Errorf("cluster: secret file: %w", err)
	}
	return []string{"--secret-file", path}, []string{"--secret-file", path}, secret, nil
}
