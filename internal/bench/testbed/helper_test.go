package testbed

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as the processes run inside the hosts: with
// helperEnv set, TestMain runs helperMain(os.Args[1:]) instead of the tests,
// so the tests need no tools beyond ip, tc and nsenter.
const helperEnv = "TESTBED_TEST_HELPER"

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperMain(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// helperArgv returns the argv and env that run helper mode args.
func helperArgv(t testing.TB, args ...string) ([]string, []string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{exe}, args...), []string{helperEnv + "=1"}
}

func helperMain(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "helper: no mode")
		return 2
	}
	fmt.Printf("pid=%d\n", os.Getpid())
	var err error
	switch args[0] {
	case "serve": // serve LISTENADDR
		err = helperServe(args[1])
	case "client": // client ADDR get|put BYTES
		err = helperClient(args[1], args[2], args[3])
	case "sleep":
		time.Sleep(time.Hour)
	case "mount": // mount DIR: tmpfs with DIR/hello, left mounted
		if err = syscall.Mount("tmpfs", args[1], "tmpfs", 0, "size=1m"); err == nil {
			err = os.WriteFile(args[1]+"/hello", []byte("hello from "+os.Getenv(envMarker+"_HOST")), 0o644)
		}
	case "cat":
		var b []byte
		if b, err = os.ReadFile(args[1]); err == nil {
			fmt.Printf("content=%s\n", b)
		}
	case "owner": // owner MODE: builds a testbed, see TestOwnerExit
		err = helperOwner(args[1])
	default:
		err = fmt.Errorf("unknown mode %q", args[0])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	return 0
}

// helperServe answers "get N\n" with N bytes and "put\n" + data with
// "got N\n", one request per connection.
func helperServe(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	fmt.Println("listening", l.Addr())
	for {
		c, err := l.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			r := bufio.NewReader(c)
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			f := strings.Fields(line)
			switch {
			case len(f) == 2 && f[0] == "get":
				n, _ := strconv.ParseInt(f[1], 10, 64)
				_, _ = io.CopyN(c, zeros{}, n)
			case len(f) == 1 && f[0] == "put":
				n, _ := io.Copy(io.Discard, r)
				fmt.Fprintf(c, "got %d\n", n)
			}
		}()
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// helperClient moves BYTES to or from a helperServe and prints the goodput.
func helperClient(addr, op, size string) error {
	n, err := strconv.ParseInt(size, 10, 64)
	if err != nil {
		return err
	}
	start := time.Now()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Printf("local=%s\n", c.LocalAddr())
	var got int64
	switch op {
	case "get":
		fmt.Fprintf(c, "get %d\n", n)
		got, err = io.Copy(io.Discard, c)
	case "put":
		fmt.Fprintf(c, "put\n")
		if _, err = io.CopyN(c, zeros{}, n); err == nil {
			_ = c.(*net.TCPConn).CloseWrite()
			var line string
			line, err = bufio.NewReader(c).ReadString('\n')
			_, _ = fmt.Sscanf(line, "got %d", &got)
		}
	default:
		return fmt.Errorf("op %q", op)
	}
	if err != nil {
		return err
	}
	if got != n {
		return fmt.Errorf("moved %d bytes, want %d", got, n)
	}
	secs := time.Since(start).Seconds()
	fmt.Printf("bytes=%d secs=%.4f mbit=%.1f\n", n, secs, float64(n)*8/secs/1e6)
	return nil
}

// helperOwner builds a one-client testbed with a sleeping process in the
// client, prints "prefix=P" and "ready", then ends as mode says.
func helperOwner(mode string) error {
	ctx := context.Background()
	if mode == "notify" {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
	}
	tb, err := New(ctx, Config{Clients: 1, HandleSignals: mode == "handle", StopGrace: time.Second})
	if err != nil {
		return err
	}
	defer tb.Close()
	exe, _ := os.Executable()
	p, err := tb.Clients()[0].Start(ctx, []string{exe, "sleep"}, []string{helperEnv + "=1"}, "")
	if err != nil {
		return err
	}
	fmt.Printf("prefix=%s\nsleeper=%d\ndir=%s\nready\n", tb.Prefix(), p.Pid, tb.Dir())
	switch mode {
	case "notify":
		<-ctx.Done()
		return nil
	case "panic":
		panic("owner panics on purpose")
	default: // "handle", "kill": wait to be signalled or killed
		select {}
	}
}
