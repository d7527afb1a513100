// Command coopbench runs the cooperative benchmarks of internal/bench/coop
// outside the coopfs binary (the same code as `coopfs bench coop`): it
// re-executes itself as the worker, and runs serve and mount from the
// coopfs binary named by --coopfs (default: `coopfs` next to it, or on
// PATH).
//
//	go build -o /tmp/coopfs ./cmd/coopfs
//	go build -o /tmp/coopbench ./internal/bench/coop/cmd/coopbench
//	sudo /tmp/coopbench copy --coopfs /tmp/coopfs --clients 1,4,8
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/coopfs/coopfs/internal/bench/coop"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "coopbench:", err)
		os.Exit(1)
	}
	bin := filepath.Join(filepath.Dir(self), "coopfs")
	if _, err := os.Stat(bin); err != nil {
		bin, _ = exec.LookPath("coopfs")
	}
	err = coop.Main(ctx, os.Args[1:], coop.Exec{Coopfs: bin, Worker: []string{self, "worker"}}, os.Stdout, os.Stderr)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.Is(err, coop.ErrUsage):
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "coopbench:", err)
		os.Exit(1)
	}
}
