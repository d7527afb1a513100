package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/coopfs/coopfs/internal/obs"
)

// readSecret reads the cluster secret from a file ("" means none).
func readSecret(path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read --secret-file: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if len(s) < 8 {
		return nil, fmt.Errorf("--secret-file %s holds %d characters; use at least 8 (for example: head -c 32 /dev/urandom | base64 > %s)", path, len(s), path)
	}
	return []byte(s), nil
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
