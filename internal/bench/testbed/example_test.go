package testbed_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/coopfs/coopfs/internal/bench/testbed"
)

// A server and 4 clients on 100 Mbit/s links: `coopfs serve` in the server,
// `coopfs mount` in every client, a workload reading through each mount, and
// the processes' metrics scraped from the driver. The coopfs flags are
// illustrative. (Compiled, not run: it needs root and a coopfs binary.)
func Example() {
	// Ctrl-C cancels ctx; New tears the testbed down when ctx ends, and the
	// deferred Close waits for that teardown.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	tb, err := testbed.New(ctx, testbed.Config{Clients: 4, ServerLink: "100mbit", ClientLink: "100mbit"})
	if err != nil {
		log.Fatal(err) // e.g. "testbed needs root and iproute2: ..."
	}
	defer tb.Close()

	srv := tb.Server()
	serve, err := srv.Start(ctx, []string{"coopfs", "serve", "--listen", srv.AddrPort(7000).String(),
		"--metrics", srv.AddrPort(9100).String(), "--export", "/srv/data"}, nil, "serve.log")
	if err != nil {
		log.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := tb.Clients()[0].WaitTCP(wctx, srv.AddrPort(7000).String(), serve); err != nil {
		log.Fatal(err) // says whether serve died, with the end of its log
	}

	// Mounts are made in the shared mount namespace (nsenter --net), so the
	// driver and every host see each client's mountpoint.
	var readers []*testbed.Proc
	for _, c := range tb.Clients() {
		mnt := filepath.Join(c.Dir(), "mnt")
		_ = os.Mkdir(mnt, 0o755)
		m, err := c.Start(ctx, []string{"coopfs", "mount", "--server", srv.AddrPort(7000).String(),
			"--peer-listen", c.AddrPort(7001).String(), mnt}, nil, "mount.log")
		if err != nil {
			log.Fatal(err)
		}
		_ = m // stopped (SIGTERM, then SIGKILL) by tb.Close; its mount is detached
		// A workload can also be one script per host.
		r, err := c.Start(ctx, []string{"sh", "-c",
			`until mountpoint -q "$1"; do sleep 0.05; done; cat "$1/big" | sha256sum`, "sh", mnt}, nil, "read.log")
		if err != nil {
			log.Fatal(err)
		}
		readers = append(readers, r)
	}
	for _, r := range readers {
		if err := r.Wait(); err != nil {
			log.Printf("%v\n%s", err, r.LogTail(5))
		}
	}

	// Scrape the server's metrics from the driver: the connection is opened
	// inside the client1 host.
	hc := &http.Client{Transport: &http.Transport{DialContext: tb.Clients()[0].DialContext}}
	resp, err := hc.Get("http://" + srv.AddrPort(9100).String() + "/metrics")
	if err == nil {
		resp.Body.Close()
	}
	for _, p := range tb.Procs() {
		fmt.Println(p.Host.Name, p.Argv[1], p.Log)
	}
}
