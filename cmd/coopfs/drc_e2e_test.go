package main

// End-to-end case of issue 7 point 6: an append whose reply is lost because
// the server died right after applying it is resent by the client to the
// restarted server, and lands once.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestE2EAppendRetriedAcrossRestart(t *testing.T) {
	needFUSE(t)
	export := newExport(t)
	addr := e2eFreeAddr(t)
	// The first server kills itself (SIGKILL) right after it applied and
	// recorded the first append, before it replies.
	t.Setenv("COOPFS_TEST_CRASH_AFTER_APPEND", "1")
	srv := startServerAt(t, addr, export)
	os.Unsetenv("COOPFS_TEST_CRASH_AFTER_APPEND")
	m := startMount(t, addr, "--reconnect-timeout", "20s")
	mustWrite(t, filepath.Join(export, "log"), nil)
	f, err := os.OpenFile(m.path("log"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	wrote := make(chan error, 1)
	go func() {
		_, err := f.Write([]byte("first line\n"))
		wrote <- err
	}()
	if _, ok := srv.wait(20 * time.Second); !ok {
		t.Fatal("the first server did not crash after the append (test hook)")
	}
	time.Sleep(500 * time.Millisecond) // the client is redialing now
	startServerAt(t, addr, export)
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatalf("append across the restart: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("append across the restart: no answer within 30s")
	}
	if _, err := f.Write([]byte("second line\n")); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(export, "log"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "first line\nsecond line\n"; string(got) != want {
		t.Fatalf("the export's file holds %q, want %q (%d copies of the first line)", got, want, strings.Count(string(got), "first line"))
	}
}
