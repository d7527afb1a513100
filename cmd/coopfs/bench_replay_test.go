package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestBenchReplayBadInput: every bad invocation gets one clear error, no
// testbed is started.
func TestBenchReplayBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "--trace FILE or --gen PATTERN"},
		{[]string{"--trace", "/nonexistent/trace"}, "trace:"},
		{[]string{"--trace", "x", "--gen", "office"}, "not both"},
		{[]string{"--gen", "nope"}, "unknown pattern"},
		{[]string{"--gen", "office", "--clients", "99"}, "--clients 99"},
		{[]string{"--gen", "office", "--policies", "none,nope"}, `policy "nope"`},
		{[]string{"--gen", "office", "--block-size", "5000"}, "power of two"},
		{[]string{"--trace", "x", "--format", "weird"}, "unknown trace format"},
		{[]string{"extra"}, "takes no arguments"},
	} {
		var stdout, stderr bytes.Buffer
		err := runBench(context.Background(), append([]string{"replay"}, c.args...), &stdout, &stderr)
		if err == nil {
			t.Errorf("%v accepted", c.args)
			continue
		}
		if msg := err.Error() + stderr.String(); !strings.Contains(msg, c.want) {
			t.Errorf("%v: %v (stderr %q), want %q", c.args, err, stderr.String(), c.want)
		}
	}
}

// TestDemoBadInput: the demo's flags are checked before anything starts.
func TestDemoBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--clients", "0"}, "at least 1"},
		{[]string{"--policies", "none,nope"}, `"nope"`},
		{[]string{"--server-link", "fast", "--policies", "none"}, "rate"},
		{[]string{"extra"}, "takes no arguments"},
	} {
		var stdout, stderr bytes.Buffer
		err := runDemo(context.Background(), c.args, &stdout, &stderr)
		if err == nil {
			t.Errorf("%v accepted", c.args)
			continue
		}
		if msg := err.Error() + stderr.String(); !strings.Contains(msg, c.want) {
			t.Errorf("%v: %v (stderr %q), want %q", c.args, err, stderr.String(), c.want)
		}
	}
}
