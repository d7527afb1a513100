package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/coopfs/coopfs/internal/bench/meta"
)

// runBenchMeta implements `coopfs bench meta`: metadata and small-file
// workloads against the export, a FUSE passthrough and a coopfs mount.
func runBenchMeta(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	err := meta.Main(ctx, args, stdout, stderr)
	if errors.Is(err, meta.ErrUsage) {
		return fmt.Errorf("%w", errUsage)
	}
	return err
}
