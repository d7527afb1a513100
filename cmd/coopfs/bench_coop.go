package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/coopfs/coopfs/internal/bench/coop"
)

// runBenchCoop implements `coopfs bench coop SUBCOMMAND`: the cooperative
// benchmarks on a testbed of network-namespace hosts. serve, mount and the
// workers inside the hosts are this same binary.
func runBenchCoop(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("bench coop: %w", err)
	}
	err = coop.Main(ctx, args, coop.Exec{Coopfs: self, Worker: []string{self, "bench", "coop", "worker"}}, stdout, stderr)
	if errors.Is(err, coop.ErrUsage) {
		return fmt.Errorf("%w", errUsage)
	}
	return err
}
