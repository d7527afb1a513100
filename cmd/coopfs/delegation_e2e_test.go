package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestE2EDelegationsAcrossMounts: mount A makes a tree of files, which it
// answers itself under its directories' delegations (agent/newfile.go),
// while mount B lists the directories over and over (each listing recalls
// A's delegation) and reads every file A closed (close-to-open: all of
// it). Then A removes a directory's files and the directory (answered
// under the delegations, agent/defer.go): once rm returned, B finds none
// of them, and neither does the export. No change answered by A failed.
func TestE2EDelegationsAcrossMounts(t *testing.T) {
	needFUSE(t)
	srv := startServer(t, newExport(t))
	metricsA := e2eFreeAddr(t)
	a := startMount(t, srv.addr, "--name", "A", "--metrics", metricsA)
	b := startMount(t, srv.addr, "--name", "B")
	const dirs, files = 6, 25
	content := func(d, f int) []byte { return bytes.Repeat(fmt.Appendf(nil, "%d/%d.", d, f), 300+d*f) }
	closed := make(chan string, dirs*files)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // B lists while A works
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for d := range dirs {
				os.ReadDir(b.path("x", fmt.Sprintf("d%d", d)))
			}
		}
	}()
	var readErrs []error
	go func() { // B reads every file A closed
		defer wg.Done()
		for rel := range closed {
			var d, f int
			fmt.Sscanf(rel, "x/d%d/f%d", &d, &f)
			got, err := os.ReadFile(b.path(rel))
			if err != nil || !bytes.Equal(got, content(d, f)) {
				readErrs = append(readErrs, fmt.Errorf("B reads %s after A closed it: %d bytes, %v", rel, len(got), err))
			}
		}
	}()
	if err := os.Mkdir(a.path("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	for d := range dirs {
		if err := os.Mkdir(a.path("x", fmt.Sprintf("d%d", d)), 0o755); err != nil {
			t.Fatal(err)
		}
		for f := range files {
			rel := fmt.Sprintf("x/d%d/f%d", d, f)
			if err := os.WriteFile(a.path(rel), content(d, f), 0o644); err != nil {
				t.Fatal(err)
			}
			closed <- rel
		}
	}
	close(closed)
	time.Sleep(50 * time.Millisecond)
	close(stop)
	wg.Wait()
	for _, err := range readErrs {
		t.Error(err)
	}
	sent := scrapeMessages(t, metricsA)
	t.Logf("A made %d files: %v", dirs*files, sent)
	if sent["CommitNew"] == 0 {
		t.Errorf("no file was created under a delegation: %v", sent)
	}

	if err := os.RemoveAll(a.path("x", "d2")); err != nil {
		t.Fatal(err)
	}
	for f := range files {
		if _, err := os.Lstat(b.path("x", "d2", fmt.Sprintf("f%d", f))); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("B finds x/d2/f%d after A removed it: %v", f, err)
		}
	}
	if ents, err := os.ReadDir(b.path("x")); err != nil || len(ents) != dirs-1 {
		t.Errorf("B lists x after A removed d2: %d entries, %v; want %d", len(ents), err, dirs-1)
	}
	if _, err := os.Lstat(filepath.Join(srv.export, "x", "d2")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("x/d2 in the export after A's rm -rf: %v", err)
	}
	for d := range dirs {
		if d == 2 {
			continue
		}
		for f := range files {
			got, err := os.ReadFile(filepath.Join(srv.export, "x", fmt.Sprintf("d%d", d), fmt.Sprintf("f%d", f)))
			if err != nil || !bytes.Equal(got, content(d, f)) {
				t.Errorf("x/d%d/f%d in the export: %d bytes, %v", d, f, len(got), err)
			}
		}
	}
	if n := scrape(t, metricsA).Sum("coopfs_answered_failures_total", nil); n != 0 {
		t.Errorf("%v changes answered by A failed on the server", n)
	}
}
