package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/coopfs/coopfs/internal/bench/demo"
	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/obs"
)

// runDemo implements `coopfs demo`: a server and several FUSE clients on
// this machine read the same files at once; see internal/bench/demo.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("demo", "[flags]\n\nGenerates a data set in a temporary directory, starts a coopfs server and several\n"+
		"FUSE clients on this machine (loopback), has every client read the same files at once,\n"+
		"checks the bytes, prints throughput and reads by layer, and cleans everything up.", stderr)
	clients := fs.Int("clients", demo.DefaultClients, "number of clients")
	files := fs.Int("files", demo.DefaultFiles, "number of files in the data set")
	fileSize := block.Size(demo.DefaultFileSize)
	fs.Var(&fileSize, "file-size", "size of each file")
	policy := fs.String("policy", demo.DefaultPolicy, "coordination policy: directory (clients serve each other's misses) or none")
	keep := fs.Bool("keep", false, "keep the data set and the process logs (the path is printed)")
	library := fs.Bool("library", false, "use the client library even where FUSE works")
	logLevel := fs.String("log-level", "warn", "launcher log level: debug, info, warn or error")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		fmt.Fprintln(stderr, "coopfs demo: takes no arguments")
		fs.Usage()
		return errUsage
	}
	r, err := demo.Run(ctx, demo.Config{Clients: *clients, Files: *files, FileSize: int64(fileSize), Policy: *policy,
		Keep: *keep, ForceLibrary: *library, Progress: stderr, Logger: obs.NewLogger(stderr, *logLevel)})
	if r != nil {
		fmt.Fprintln(stdout)
		if werr := r.WriteText(stdout); werr != nil {
			return werr
		}
		if *keep {
			fmt.Fprintf(stdout, "Kept: %s\n", r.Dir)
		}
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return errors.New("interrupted; everything started was stopped and removed")
		}
		return err
	}
	if !r.Verified() {
		return errors.New("some clients read wrong bytes (see MISMATCH above)")
	}
	return nil
}
