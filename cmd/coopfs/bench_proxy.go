package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/coopfs/coopfs/internal/bench/proxybench"
	"github.com/coopfs/coopfs/internal/block"
)

// runBenchProxy implements `coopfs bench proxy`.
func runBenchProxy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const synopsis = "[flags]\n\nThe caching proxy on a netns testbed (root): a WAN-linked server, a LAN proxy and\n" +
		"two clients; direct, first, second-client and warm-restart reads beside the links' TCP ceilings\n" +
		"(see docs/benchmarks-disk.md, \"Proxies\")."
	fs := newFlagSet("bench proxy", synopsis, stderr)
	size := block.Size(8 << 20)
	fs.Var(&size, "size", "size of the file each repetition reads")
	reps := fs.Int("reps", 3, "repetitions (the report gives medians)")
	wan := fs.String("wan", "10mbit", "the server's link (tc rate)")
	lan := fs.String("lan", "100mbit", "the proxy's and the clients' links (tc rate)")
	dir := fs.String("dir", "", "run directory (logs, export, proxy cache); default a new temporary directory")
	var out benchOutput
	out.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 || *reps < 1 || size < 1 {
		fmt.Fprintln(stderr, "coopfs bench proxy: takes no arguments; --reps and --size must be positive")
		fs.Usage()
		return errUsage
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("bench proxy: %w", err)
	}
	r, err := proxybench.Run(ctx, proxybench.Config{Coopfs: self, Size: int64(size), Reps: *reps, WANLink: *wan, LANLink: *lan, Dir: *dir})
	if err != nil {
		return err
	}
	return out.write(r, stdout)
}
