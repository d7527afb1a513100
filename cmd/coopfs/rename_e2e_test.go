package main

// End-to-end case of issue 7 point 5: a file replaced by rename again and
// again on one client is always there for readers on other clients (no
// failed open), and every read returns one whole version.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// renameVersion is version i of the replaced file: a header naming the
// version and the length, then bytes that depend on i.
func renameVersion(i int) []byte {
	n := 1000 + (i*7919)%60000 // sizes vary, so a mix of sizes shows too
	head := fmt.Sprintf("v=%08d len=%08d\n", i, n)
	b := make([]byte, n)
	copy(b, head)
	for j := len(head); j < n; j++ {
		b[j] = byte(i + j/512)
	}
	return b
}

// checkVersion reports whether b is one whole version.
func checkVersion(b []byte) error {
	var i, n int
	if _, err := fmt.Sscanf(string(b[:min(len(b), 22)]), "v=%08d len=%08d\n", &i, &n); err != nil {
		return fmt.Errorf("no header in %d bytes: %q", len(b), b[:min(len(b), 22)])
	}
	if !bytes.Equal(b, renameVersion(i)) {
		return fmt.Errorf("version %d: %d bytes read, want %d, content differs", i, len(b), n)
	}
	return nil
}

// renameStats counts what the readers saw.
type renameStats struct {
	reads, opens atomic.Int64
	openErrs     sync.Map // errno string → *atomic.Int64
	openFailed   atomic.Int64
	mixed        atomic.Int64
	firstMixed   atomic.Value
}

func (s *renameStats) openError(err error) {
	s.openFailed.Add(1)
	key := err.Error()
	var errno syscall.Errno
	if errors.As(err, &errno) {
		key = errno.Error()
	}
	v, _ := s.openErrs.LoadOrStore(key, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

func TestE2ERenameReplaceReaders(t *testing.T) {
	needFUSE(t)
	srv := startServer(t, newExport(t))
	w := startMount(t, srv.addr, "--name", "W")
	readers := []*e2eMount{startMount(t, srv.addr, "--name", "R1"), startMount(t, srv.addr, "--name", "R2")}
	mustWrite(t, w.path("f"), renameVersion(0))
	d := 4 * time.Second
	if testing.Short() {
		d = time.Second
	}
	stop := make(chan struct{})
	var st renameStats
	var wg sync.WaitGroup
	for _, r := range readers {
		for k := 0; k < 2; k++ {
			wg.Add(1)
			go func(path string) {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					st.opens.Add(1)
					f, err := os.Open(path)
					if err != nil {
						st.openError(err)
						continue
					}
					b, err := io.ReadAll(f)
					f.Close()
					st.reads.Add(1)
					if err == nil {
						err = checkVersion(b)
					}
					if err != nil {
						if st.mixed.Add(1) == 1 {
							st.firstMixed.Store(err.Error())
						}
					}
				}
			}(r.path("f"))
		}
	}
	writes := 0
	deadline := time.Now().Add(d)
	for i := 1; time.Now().Before(deadline); i++ {
		tmp := w.path(fmt.Sprintf(".f.tmp%d", i))
		if err := os.WriteFile(tmp, renameVersion(i), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, w.path("f")); err != nil {
			t.Fatal(err)
		}
		writes++
	}
	close(stop)
	wg.Wait()
	var errs []string
	st.openErrs.Range(func(k, v any) bool {
		errs = append(errs, fmt.Sprintf("%s: %d", k, v.(*atomic.Int64).Load()))
		return true
	})
	t.Logf("rename-replace: %d renames, %d opens by 4 readers on 2 other mounts, %d failed (%v), %d reads, %d not one whole version",
		writes, st.opens.Load(), st.openFailed.Load(), errs, st.reads.Load(), st.mixed.Load())
	if st.openFailed.Load() != 0 {
		t.Errorf("%d of %d opens failed: %v", st.openFailed.Load(), st.opens.Load(), errs)
	}
	if st.mixed.Load() != 0 {
		t.Errorf("%d reads were not one whole version; first: %v", st.mixed.Load(), st.firstMixed.Load())
	}
}
