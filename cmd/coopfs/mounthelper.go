package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The mount helper: mount(8) runs /sbin/mount.fuse.coopfs (a symlink to
// this binary) for `mount -t fuse.coopfs` and fstab lines of that type, as
//
//	mount.fuse.coopfs SPEC DIR [-sfnv] [-N NS] [-o OPTIONS] [-t fuse.coopfs]
//
// and mount.fuse3 (when only it is installed, for `-t fuse.coopfs` or the
// old `coopfs#SPEC` form) runs `coopfs SPEC DIR -o OPTIONS` from $PATH.
// SPEC is the server's HOST:PORT (or anything, with server= in the
// options); every other option is a `coopfs mount` flag with _ or - between
// words (cache_size=4GiB, secret_file=/etc/coopfs/secret, disk_cache=...),
// plus the generic ones that mount(8) and systemd handle themselves. The
// helper starts `coopfs mount` as a daemon in its own session and exits 0
// once the FUSE mount is up (the daemon's READY=1 on a notify socket), or
// prints the daemon's one-line error and exits 32 (mount's "mount failure")
// if it ends before.

// Names the helper is run by, and the name the helper gives the daemon it
// starts (argv[0] dispatch, so one binary does all three).
const (
	helperName      = "mount.fuse.coopfs"
	helperShortName = "mount.coopfs"
	daemonName      = "coopfs-mountd"
)

// mount(8)'s exit codes that a helper returns.
const (
	mountExitUsage   = 1  // incorrect invocation or permissions
	mountExitFailure = 32 // mount failure
)

// isMountHelper reports whether argv is a helper's or the mount daemon's
// invocation rather than `coopfs COMMAND ...`.
func isMountHelper(argv []string) bool {
	switch filepath.Base(argv[0]) {
	case helperName, helperShortName, daemonName:
		return true
	}
	// mount.fuse3's form: `coopfs SPEC DIR -o OPTIONS`, where SPEC is no
	// command of ours and DIR an existing directory.
	if len(argv) < 3 || strings.HasPrefix(argv[1], "-") || isCommand(argv[1]) {
		return false
	}
	fi, err := os.Stat(argv[2])
	return err == nil && fi.IsDir()
}

func isCommand(name string) bool {
	return slices.ContainsFunc(commands(), func(c command) bool { return c.name == name })
}

// runMountHelper runs the helper (or, under daemonName, the daemon) and
// returns the exit code.
func runMountHelper(argv []string, stderr io.Writer) int {
	if filepath.Base(argv[0]) == daemonName {
		return runMountDaemon(argv[1:])
	}
	inv, err := parseHelperArgs(argv[1:])
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", helperName, err)
		return mountExitUsage
	}
	flags, err := mountFlagInfo()
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", helperName, err)
		return mountExitFailure
	}
	mountArgs, hopts, err := inv.mountArgs(flags)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %s on %s: %v\n", helperName, inv.spec, inv.dir, err)
		return mountExitUsage
	}
	if inv.verbose {
		fmt.Fprintf(stderr, "%s: coopfs mount %s\n", helperName, strings.Join(mountArgs, " "))
	}
	if inv.fake {
		return 0
	}
	if err := startMountDaemon(mountArgs, hopts); err != nil {
		fmt.Fprintf(stderr, "%s: %s on %s: %v\n", helperName, inv.spec, inv.dir, err)
		return mountExitFailure
	}
	return 0
}

// helperInvocation is the helper's command line, parsed.
type helperInvocation struct {
	spec, dir             string
	opts                  []string // the -o options, split at commas, in order
	sloppy, fake, verbose bool
}

// parseHelperArgs parses mount(8)'s helper command line: two positional
// arguments and the flags -s -f -n -v -o OPTS -t TYPE -N NS in any order.
func parseHelperArgs(args []string) (helperInvocation, error) {
	var inv helperInvocation
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		switch a {
		case "-o", "-t", "-N":
			if i+1 == len(args) {
				return inv, fmt.Errorf("%s needs a value", a)
			}
			i++
			if a == "-o" {
				inv.opts = append(inv.opts, splitOptions(args[i])...)
			}
		default:
			for _, c := range a[1:] {
				switch c {
				case 's':
					inv.sloppy = true
				case 'f':
					inv.fake = true
				case 'v':
					inv.verbose = true
				case 'n': // no mtab: there is none to write
				default:
					return inv, fmt.Errorf("unknown flag -%c (usage: %s SERVER:PORT DIR [-sfnv] [-o OPTIONS])", c, helperName)
				}
			}
		}
	}
	if len(pos) != 2 {
		return inv, fmt.Errorf("want SERVER:PORT and a mount point, got %d arguments (usage: %s SERVER:PORT DIR [-sfnv] [-o OPTIONS])", len(pos), helperName)
	}
	inv.spec, inv.dir = strings.TrimPrefix(pos[0], "coopfs#"), pos[1]
	return inv, nil
}

func splitOptions(s string) []string {
	var out []string
	for o := range strings.SplitSeq(s, ",") {
		if o = strings.TrimSpace(o); o != "" {
			out = append(out, o)
		}
	}
	return out
}

// helperOptions are the options the helper takes itself.
type helperOptions struct {
	logFile string // log_file=: where the daemon logs (default: syslog, else a file in /var/log/coopfs)
}

// genericOption reports whether o is one of the options mount(8), systemd
// or the kernel's FUSE handle, which coopfs mount has nothing to do with:
// nofail and _netdev order boot (systemd reads them from fstab), x-* are
// for userspace tools, the rest are mount(8)'s or FUSE's own (a coopfs
// mount is always nosuid and nodev, and checks permissions itself).
func genericOption(key string) bool {
	if strings.HasPrefix(key, "x-") || strings.HasPrefix(key, "comment") {
		return true
	}
	switch key {
	case "defaults", "auto", "noauto", "user", "nouser", "users", "owner", "group", "_netdev", "nofail",
		"rw", "suid", "nosuid", "dev", "nodev", "exec", "noexec", "async", "sync", "dirsync",
		"atime", "noatime", "diratime", "nodiratime", "relatime", "norelatime", "strictatime", "lazytime", "nolazytime",
		"allow_other", "default_permissions", "fsname", "subtype", "loud", "silent":
		return true
	}
	return false
}

// mountArgs maps the invocation onto `coopfs mount`'s command line, using
// its flags as describeFlags lists them.
func (inv helperInvocation) mountArgs(flags []flagInfo) ([]string, helperOptions, error) {
	var args []string
	var h helperOptions
	byName := map[string]flagInfo{}
	for _, f := range flags {
		byName[f.Name] = f
	}
	set := map[string]string{}
	for _, o := range inv.opts {
		key, val, hasVal := strings.Cut(o, "=")
		name := strings.ReplaceAll(key, "_", "-")
		switch {
		case key == "log_file" || key == "log-file":
			h.logFile = val
			continue
		case key == "ro":
			name, val, hasVal = "write-policy", "read-only", true
		case key == "user" && hasVal, genericOption(key):
			continue
		}
		f, ok := byName[name]
		switch {
		case !ok && inv.sloppy:
			continue
		case !ok:
			return nil, h, fmt.Errorf("unknown option %q: the options are coopfs mount's flags with _ between words (cache_size=4GiB, secret_file=FILE; `coopfs mount -h` lists them) and the generic ones (nofail, _netdev, noauto, x-systemd.*, ro)", key)
		case !hasVal && !f.Bool:
			return nil, h, fmt.Errorf("option %s needs a value: %s=...", key, key)
		}
		if prev, dup := set[name]; dup && prev != val {
			return nil, h, fmt.Errorf("option %s given twice (%q and %q)", key, prev, val)
		}
		set[name] = val
		if hasVal {
			args = append(args, "--"+name+"="+val)
		} else {
			args = append(args, "--"+name)
		}
	}
	if _, ok := set["server"]; !ok {
		if !strings.Contains(inv.spec, ":") {
			return nil, h, fmt.Errorf("no server: give it as the source (HOST:PORT) or as server=HOST:PORT in the options")
		}
		args = append([]string{"--server=" + inv.spec}, args...)
	}
	return append(args, inv.dir), h, nil
}

// mountFlagInfo returns `coopfs mount`'s flags.
func mountFlagInfo() ([]flagInfo, error) {
	var out bytes.Buffer
	if err := runMount(context.Background(), []string{describeFlagsArg}, io.Discard, &out); err != nil && !errors.Is(err, flag.ErrHelp) {
		return nil, fmt.Errorf("list coopfs mount's flags: %w", err)
	}
	var flags []flagInfo
	if err := json.Unmarshal(out.Bytes(), &flags); err != nil {
		return nil, fmt.Errorf("list coopfs mount's flags: %w", err)
	}
	return flags, nil
}
