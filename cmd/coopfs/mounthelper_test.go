package main

import (
	"slices"
	"strings"
	"testing"
)

// TestHelperOptions maps mount(8)'s helper command lines onto coopfs mount's
// real flag set (no mount made).
func TestHelperOptions(t *testing.T) {
	flags, err := mountFlagInfo()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		argv    []string
		want    []string // the coopfs mount arguments
		wantErr string
	}{
		{[]string{"srv:7000", "/mnt/c", "-o", "rw,_netdev,nofail,x-systemd.automount,x-systemd.mount-timeout=30,defaults,noatime,cache_size=4GiB,secret_file=/etc/s"},
			[]string{"--server=srv:7000", "--cache-size=4GiB", "--secret-file=/etc/s", "/mnt/c"}, ""},
		{[]string{"coopfs", "/mnt/c", "-o", "server=srv:1,ro,no_callbacks,disk-cache=/var/c"},
			[]string{"--server=srv:1", "--write-policy=read-only", "--no-callbacks", "--disk-cache=/var/c", "/mnt/c"}, ""},
		{[]string{"coopfs#srv:7000", "/mnt/c", "-n", "-o", "user=alice,policy=directory", "-t", "fuse.coopfs"},
			[]string{"--server=srv:7000", "--policy=directory", "/mnt/c"}, ""},
		{[]string{"srv:7000", "/mnt/c", "-s", "-o", "bogus=1,cache_size=1GiB"}, []string{"--server=srv:7000", "--cache-size=1GiB", "/mnt/c"}, ""},
		{[]string{"srv:7000", "/mnt/c", "-o", "bogus=1"}, nil, `unknown option "bogus"`},
		{[]string{"srv:7000", "/mnt/c", "-o", "cache_size"}, nil, "needs a value"},
		{[]string{"srv:7000", "/mnt/c", "-o", "cache_size=1GiB,cache_size=2GiB"}, nil, "given twice"},
		{[]string{"coopfs", "/mnt/c", "-o", "cache_size=1GiB"}, nil, "no server"},
		{[]string{"srv:7000"}, nil, "want SERVER:PORT and a mount point"},
		{[]string{"srv:7000", "/mnt/c", "-x"}, nil, "unknown flag -x"},
	}
	for _, c := range cases {
		inv, err := parseHelperArgs(c.argv)
		var args []string
		if err == nil {
			args, _, err = inv.mountArgs(flags)
		}
		switch {
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%q: error %v, want %q", c.argv, err, c.wantErr)
		case c.wantErr == "" && err != nil:
			t.Errorf("%q: %v", c.argv, err)
		case c.wantErr == "" && !slices.Equal(args, c.want):
			t.Errorf("%q:\n got %q\nwant %q", c.argv, args, c.want)
		}
	}
}

// TestHelperLogFile: log_file= is the helper's, not a mount flag.
func TestHelperLogFile(t *testing.T) {
	flags, err := mountFlagInfo()
	if err != nil {
		t.Fatal(err)
	}
	inv, err := parseHelperArgs([]string{"srv:1", "/m", "-o", "log_file=/var/log/x.log"})
	if err != nil {
		t.Fatal(err)
	}
	args, h, err := inv.mountArgs(flags)
	if err != nil || h.logFile != "/var/log/x.log" || slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, "log") }) {
		t.Fatalf("args %q, helper options %+v, err %v", args, h, err)
	}
}

// TestIsMountHelper: the names and the mount.fuse3 form are the helper's;
// the commands are not.
func TestIsMountHelper(t *testing.T) {
	tmp := t.TempDir()
	for _, c := range []struct {
		argv []string
		want bool
	}{
		{[]string{"/sbin/mount.fuse.coopfs", "a:1", "/m"}, true},
		{[]string{"mount.coopfs"}, true},
		{[]string{"coopfs-mountd", "mount"}, true},
		{[]string{"coopfs", "srv:1", tmp, "-o", "x"}, true},
		{[]string{"coopfs", "mount", tmp}, false},
		{[]string{"coopfs", "srv:1", tmp + "/missing"}, false},
		{[]string{"coopfs", "stats", "127.0.0.1:1"}, false},
	} {
		if got := isMountHelper(c.argv); got != c.want {
			t.Errorf("isMountHelper(%q) = %v, want %v", c.argv, got, c.want)
		}
	}
}
