// Command coopfs is the cooperative-caching file system: one binary whose
// subcommands are the file server, the FUSE client, the simulator, the
// benchmark harness and the operator tools.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
)

// command is one subcommand: its flags are parsed by run itself so that
// `coopfs CMD -h` lists them with their defaults.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"serve", "export a directory tree to coopfs clients", runServe},
		{"mount", "mount a coopfs server with FUSE (foreground)", runMount},
		{"proxy", "a caching proxy between clients and a server (or another proxy); proxies cascade", runProxy},
		{"secret", "write a new cluster secret to a file", runSecret},
		{"ca", "make a cluster CA (ca init) and certificates (ca issue NAME)", runCA},
		{"flush", "write back a write-back mount's dirty data now, with progress", runFlush},
		{"warmup", "prefetch files or trees into a mount's caches (--cluster: a set of clients together), with progress", runWarmup},
		{"status", "say whether a mount (or a server, --server) is healthy: server, RTT, policy, caches, peers, dirty data; exit 0 only when healthy", runStatus},
		{"csi", "Kubernetes CSI driver: mounts coopfs volumes for pods (Identity, Node and Controller services on a unix socket)", runCSI},
		{"stats", "print a coopfs process's counters (reads by layer, bytes, messages)", runStats},
		{"demo", "start a server and several clients here and show cooperative reads", runDemo},
		{"bench", "measure a live coopfs: FUSE ceilings, caches, cold and random reads", runBench},
		{"sim", "trace-driven simulator of cooperative caching algorithms", runSim},
		{"man", "write the man pages (generated from this help) into a directory", runMan},
		{"help", "list the subcommands", nil},
	}
}

// errUsage marks an error already explained by the flag package's usage output.
var errUsage = errors.New("usage")

func main() {
	if isMountHelper(os.Args) { // mounthelper.go: mount(8) runs us as mount.fuse.coopfs
		os.Exit(runMountHelper(os.Args, os.Stderr))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, journalWriter(os.Stderr)) // journal.go: log priorities for journald
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name != args[0] || c.run == nil {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			return 2
		default:
			fmt.Fprintf(stderr, "coopfs %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "coopfs: unknown command %q; run 'coopfs help' for the list\n", args[0])
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "coopfs: a cooperative-caching distributed file system")
	fmt.Fprintln(w, "\nUsage: coopfs COMMAND [flags] [args]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-7s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'coopfs COMMAND -h' for the flags of a command and their defaults.")
}

// newFlagSet returns a FlagSet that reports errors instead of exiting and
// prints its usage to stderr.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("coopfs "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: coopfs %s %s\n\nFlags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses args and maps a parse failure to errUsage (the flag
// package has already printed what was wrong).
func parseFlags(fs *flag.FlagSet, args []string) error {
	if slices.Equal(args, []string{describeFlagsArg}) { // describe.go: the mount helper and the man pages
		return describeFlags(fs)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	return nil
}
