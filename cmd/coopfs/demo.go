package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/coopfs/coopfs/internal/bench/demo"
	"github.com/coopfs/coopfs/internal/bench/report"
	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/obs"
)

// runDemo implements `coopfs demo`: where root and network namespaces are
// available, a server and several client hosts on shaped links read the
// same files under none, directory and hints side by side; elsewhere a
// server and several FUSE clients on loopback; see internal/bench/demo.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("demo", "[flags]\n\nGenerates a data set in a temporary directory and has several clients read the same files\n"+
		"at once. As root with network namespaces: every client is a host with its own link, the server's\n"+
		"link is shaped (100 Mbit/s), and the policies none, directory and hints run side by side (about a\n"+
		"minute); it prints the speed-up and the bytes the server sent. Elsewhere it says why and runs the\n"+
		"clients on loopback. Checks every byte and cleans everything up, also on Ctrl-C.", stderr)
	clients := fs.Int("clients", 0, fmt.Sprintf("number of clients (default %d on the testbed, %d on loopback)", demo.DefaultHostClients, demo.DefaultClients))
	files := fs.Int("files", 0, fmt.Sprintf("number of files in the data set (default %d)", demo.DefaultFiles))
	var fileSize block.Size
	fs.Var(&fileSize, "file-size", fmt.Sprintf("size of each file (default %s on the testbed, %s on loopback)",
		block.Size(demo.DefaultHostFileSize), block.Size(demo.DefaultFileSize)))
	policies := fs.String("policies", strings.Join(demo.DefaultPolicies, ","), "testbed: policies run side by side")
	serverLink := fs.String("server-link", demo.DefaultServerLink, "testbed: the server's link rate (tc units: 100mbit, 1gbit)")
	clientLink := fs.String("client-link", demo.DefaultClientLink, "testbed: each client's link rate")
	loopback := fs.Bool("loopback", false, "run the loopback demo even where the testbed could run")
	policy := fs.String("policy", demo.DefaultPolicy, "loopback: coordination policy, directory (clients serve each other's misses) or none")
	keep := fs.Bool("keep", false, "keep the data set and the process logs (the path is printed)")
	library := fs.Bool("library", false, "loopback: use the client library even where FUSE works")
	logLevel := fs.String("log-level", "warn", "launcher log level: debug, info, warn or error")
	binary := fs.String("binary", "", "") // hidden: the coopfs binary of serve and mount (default: this one), to compare builds
	var out benchOutput
	out.register(fs)
	hideFlags(fs, stderr, "[flags]", "binary")
	fs.Lookup("out").Usage = "write demo.json, demo.txt and the plot demo.png/.svg (testbed) to DIR"
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		fmt.Fprintln(stderr, "coopfs demo: takes no arguments")
		fs.Usage()
		return errUsage
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["file-size"] && fileSize <= 0 {
		return fmt.Errorf("--file-size %d: want at least one byte", fileSize)
	}
	if (set["clients"] && *clients < 1) || (set["files"] && *files < 1) {
		return errors.New("--clients and --files must be at least 1")
	}
	var ps []string
	for _, p := range strings.Split(*policies, ",") {
		if p = strings.TrimSpace(p); p != "" {
			ps = append(ps, p)
		}
	}
	res, err := demo.RunAuto(ctx, demo.Config{Clients: *clients, Files: *files, FileSize: int64(fileSize), Policy: *policy,
		Policies: ps, ServerLink: *serverLink, ClientLink: *clientLink, Loopback: *loopback,
		Keep: *keep, ForceLibrary: *library, Binary: *binary, Progress: stderr, Logger: obs.NewLogger(stderr, *logLevel)})
	if res != nil && (res.Hosts != nil || res.Loopback != nil) {
		fmt.Fprintln(stdout)
		plot := func(paths ...string) error { return res.Plot(paths...) }
		if werr := (report.Output{JSON: out.jsonPath, Dir: out.outDir}).Write(res, "demo", plot, stdout); werr != nil {
			return werr
		}
		if *keep && res.Loopback != nil {
			fmt.Fprintf(stdout, "Kept: %s\n", res.Loopback.Dir)
		}
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return errors.New("interrupted; everything started was stopped and removed")
		}
		return err
	}
	if !res.Verified() {
		return errors.New("some clients read wrong bytes (see MISMATCH above)")
	}
	return nil
}
