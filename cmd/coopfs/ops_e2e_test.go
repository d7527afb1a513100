package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// installHelper puts /sbin/mount.fuse.coopfs (the path mount(8) searches;
// it does not use $PATH) as a symlink to the test binary for the test's
// duration. A helper already there (an installed package) is left alone
// and the test skipped.
func installHelper(t *testing.T) {
	t.Helper()
	const path = "/sbin/" + helperName
	if _, err := os.Lstat(path); err == nil {
		t.Skipf("%s exists (an installed coopfs?): not replacing it", path)
	}
	if err := os.Symlink(e2e.bin, path); err != nil {
		t.Skipf("cannot install the mount helper: %v", err)
	}
	t.Cleanup(func() { os.Remove(path) })
}

// runExit runs name with args and returns its combined output and exit
// code, failing the test if it does not end within d.
func runTimed(t *testing.T, d time.Duration, name string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(name, args...)
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(d):
		cmd.Process.Kill()
		<-done
		t.Fatalf("%s %s: still running after %s", name, strings.Join(args, " "), d)
	}
	return out.String(), cmd.ProcessState.ExitCode()
}

// unmountAfter unmounts dir at the end of the test if it is still mounted
// (a failed test must not leave the helper's daemon behind).
func unmountAfter(t *testing.T, dir string) {
	t.Cleanup(func() {
		if e2eIsMounted(dir) {
			exec.Command("umount", "-l", dir).Run()
		}
	})
}

// TestE2EMountHelperFstab mounts through an fstab line with mount(8) (the
// helper mount.fuse.coopfs daemonizes once mounted), asks `coopfs status`,
// and unmounts with umount(8): the daemon goes away with the mount.
func TestE2EMountHelperFstab(t *testing.T) {
	needFUSE(t)
	installHelper(t)
	export := t.TempDir()
	if err := os.WriteFile(filepath.Join(export, "hello"), []byte("from the server\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, export)
	dir := newMountpoint(t)
	unmountAfter(t, dir)
	logFile := filepath.Join(t.TempDir(), "mount.log")
	fstab := filepath.Join(t.TempDir(), "fstab")
	line := srv.addr + " " + dir + " fuse.coopfs secret_file=" + e2e.secret +
		",cache_size=64MiB,read_ahead=8,log_file=" + logFile + ",_netdev,nofail,noauto,x-systemd.mount-timeout=30s,defaults 0 0\n"
	if err := os.WriteFile(fstab, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := runTimed(t, time.Minute, "mount", "--fstab", fstab, dir)
	if code != 0 {
		t.Fatalf("mount --fstab: exit %d: %s", code, out)
	}
	// mount(8) returned: the mount must be there already, not later.
	if !e2eIsMounted(dir) {
		t.Fatalf("mount returned 0 but %s is not mounted; output %q", dir, out)
	}
	got, err := os.ReadFile(filepath.Join(dir, "hello"))
	if err != nil || string(got) != "from the server\n" {
		t.Fatalf("read through the fstab mount: %q, %v", got, err)
	}
	out, code = runTimed(t, 30*time.Second, e2e.bin, "status", dir)
	if code != 0 || !strings.Contains(out, "healthy") || !strings.Contains(out, srv.addr) || !strings.Contains(out, "local_memory") {
		t.Fatalf("coopfs status of a healthy mount: exit %d:\n%s", code, out)
	}
	out, code = runTimed(t, 30*time.Second, e2e.bin, "status", "--json", dir)
	var st mountStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != 0 || !st.Healthy || st.Agent.Server != srv.addr || st.Agent.TLS != "tls+secret" || st.Agent.RTT <= 0 {
		t.Fatalf("coopfs status --json: exit %d, %v:\n%s", code, err, out)
	}
	if out, code := runTimed(t, 30*time.Second, "umount", dir); code != 0 {
		t.Fatalf("umount: exit %d: %s", code, out)
	}
	if e2eIsMounted(dir) {
		t.Fatal("still mounted after umount")
	}
	out, code = runTimed(t, 30*time.Second, e2e.bin, "status", dir)
	if code == 0 || !strings.Contains(out, "not mounted") {
		t.Fatalf("coopfs status after umount: exit %d (want non-zero):\n%s", code, out)
	}
	// The daemon ends with its mount: its log says so last.
	if err := within(t, 10*time.Second, "the mount daemon's exit", func() error {
		b, _ := os.ReadFile(logFile)
		if !strings.Contains(string(b), "unmounted from outside") {
			return errors.New("no 'unmounted from outside' in the log yet")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestE2EMountHelperBadInput: a wrong option, a missing secret, an
// unreachable server: one line from mount.fuse.coopfs, a non-zero exit,
// and nothing mounted.
func TestE2EMountHelperBadInput(t *testing.T) {
	needFUSE(t)
	installHelper(t)
	srv := startServer(t, t.TempDir())
	dead := e2eFreeAddr(t)
	cases := []struct {
		name, spec, opts, want string
		code                   int
	}{
		{"unknown option", srv.addr, "secret_file=" + e2e.secret + ",cache_sise=1GiB", `unknown option "cache_sise"`, mountExitUsage},
		{"option without value", srv.addr, "secret_file=" + e2e.secret + ",cache_size", "needs a value", mountExitUsage},
		{"no server", "coopfs", "secret_file=" + e2e.secret, "no server", mountExitUsage},
		{"missing secret", srv.addr, "secret_file=/nonexistent/secret", "secret-file", mountExitFailure},
		{"unreachable server", dead, "secret_file=" + e2e.secret + ",reconnect_timeout=1s", "unreachable", mountExitFailure},
	}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			dir := newMountpoint(t)
			unmountAfter(t, dir)
			out, code := runTimed(t, time.Minute, "mount", "-t", "fuse.coopfs", "-o", c.opts+",log_file="+filepath.Join(t.TempDir(), "log"), c.spec, dir)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if code != c.code || len(lines) != 1 || !strings.HasPrefix(lines[0], helperName+": ") || !strings.Contains(lines[0], c.want) {
				t.Errorf("mount: exit %d (want %d), output (want one %q line):\n%s", code, c.code, c.want, out)
			}
			if e2eIsMounted(dir) {
				t.Errorf("%s is mounted after a failed mount", dir)
			}
		})
	}
}

// TestE2EMountFuse3Form: without mount.fuse.coopfs, mount.fuse3 runs
// `coopfs SPEC DIR -o OPTIONS`; the binary takes that form too.
func TestE2EMountFuse3Form(t *testing.T) {
	needFUSE(t)
	export := t.TempDir()
	os.WriteFile(filepath.Join(export, "f"), []byte("x"), 0o644)
	srv := startServer(t, export)
	dir := newMountpoint(t)
	unmountAfter(t, dir)
	out, code := runTimed(t, time.Minute, e2e.bin, srv.addr, dir, "-o", "secret_file="+e2e.secret+",nofail,log_file="+filepath.Join(t.TempDir(), "log"))
	if code != 0 || !e2eIsMounted(dir) {
		t.Fatalf("coopfs SPEC DIR -o ...: exit %d, mounted %v: %s", code, e2eIsMounted(dir), out)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "f")); err != nil || string(b) != "x" {
		t.Fatalf("read: %q %v", b, err)
	}
	if out, code := runTimed(t, 30*time.Second, "umount", dir); code != 0 {
		t.Fatalf("umount: exit %d: %s", code, out)
	}
}

// listenNotify listens on a unixgram socket as systemd's $NOTIFY_SOCKET.
func listenNotify(t *testing.T) (*net.UnixConn, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, path
}

// waitNotify waits for READY=1 on c, failing the test after d.
func waitNotify(t *testing.T, c *net.UnixConn, d time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		if err != nil {
			t.Fatalf("no READY=1 on NOTIFY_SOCKET: %v", err)
		}
		if strings.Contains("\n"+string(buf[:n])+"\n", "\nREADY=1\n") {
			return
		}
	}
}

// startNotified starts coopfs args with $NOTIFY_SOCKET set, returning the
// process and the socket.
func startNotified(t *testing.T, args ...string) (*exec.Cmd, *net.UnixConn) {
	t.Helper()
	c, path := listenNotify(t)
	cmd := exec.Command(e2e.bin, withCredentials(args)...)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+path)
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
		if t.Failed() {
			t.Logf("%s stderr:\n%s", args[0], stderr.String())
		}
	})
	return cmd, c
}

// TestE2ESdNotify: serve, proxy and mount send READY=1 to $NOTIFY_SOCKET
// (systemd's Type=notify) only once they accept connections or are
// mounted.
func TestE2ESdNotify(t *testing.T) {
	needFUSE(t)
	addr := e2eFreeAddr(t)
	_, sc := startNotified(t, "serve", "--export", t.TempDir(), "--listen", addr, "--squash", "none")
	waitNotify(t, sc, 30*time.Second)
	if c, err := net.Dial("tcp", addr); err != nil {
		t.Fatalf("serve said READY=1 but does not accept: %v", err)
	} else {
		c.Close()
	}
	paddr := e2eFreeAddr(t)
	_, pc := startNotified(t, "proxy", "--upstream", addr, "--listen", paddr)
	waitNotify(t, pc, 30*time.Second)
	if c, err := net.Dial("tcp", paddr); err != nil {
		t.Fatalf("proxy said READY=1 but does not accept: %v", err)
	} else {
		c.Close()
	}
	dir := newMountpoint(t)
	_, mc := startNotified(t, "mount", "--server", addr, dir)
	waitNotify(t, mc, 30*time.Second)
	if !e2eIsMounted(dir) {
		t.Fatal("mount said READY=1 before it was mounted")
	}
}

// TestDeploySystemdUnits checks deploy/systemd's units with
// systemd-analyze verify (systemd is not PID 1 on every test machine, so
// the units are not started): every warning about them fails the test.
func TestDeploySystemdUnits(t *testing.T) {
	needBinary(t)
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze missing: apt-get install systemd")
	}
	units, err := filepath.Glob("../../deploy/systemd/*")
	if err != nil || len(units) == 0 {
		t.Fatalf("no units in deploy/systemd: %v", err)
	}
	dir := t.TempDir()
	var paths []string
	for _, u := range units {
		b, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		// verify checks that ExecStart's program exists: the test binary
		// stands in for the installed one.
		p := filepath.Join(dir, filepath.Base(u))
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(string(b), "/usr/bin/coopfs", e2e.bin)), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	out, _ := runTimed(t, time.Minute, "systemd-analyze", append([]string{"verify", "--man=no"}, paths...)...)
	for l := range strings.SplitSeq(out, "\n") {
		if strings.Contains(l, dir) {
			t.Errorf("systemd-analyze verify: %s", l)
		}
	}
}

// TestE2EStatusMount: `coopfs status` of a write-back mount shows its dirty
// data until a flush, and says NOT HEALTHY (exit 1) once the server is gone.
func TestE2EStatusMount(t *testing.T) {
	needFUSE(t)
	srv := startServer(t, t.TempDir())
	m := startMount(t, srv.addr, "--disk-cache", t.TempDir(), "--write-policy", "write-back", "--write-back-delay", "1h", "--reconnect-timeout", "1s")
	if err := os.WriteFile(m.path("dirty"), make([]byte, 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	status := func() (mountStatus, int) {
		out, code := runTimed(t, 30*time.Second, e2e.bin, "status", "--json", m.dir)
		var st mountStatus
		if err := json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &st); err != nil {
			t.Fatalf("status --json: %v:\n%s", err, out)
		}
		return st, code
	}
	st, code := status()
	if code != 0 || !st.Healthy || st.Agent.DirtyFiles != 1 || st.Agent.DirtyBytes < 3<<20 || st.Agent.WritePolicy != "write-back" {
		t.Fatalf("status of a write-back mount holding 3 MiB dirty: exit %d, %+v", code, st)
	}
	if len(st.Tiers) < 2 {
		t.Errorf("want the memory and disk tiers in the status, got %+v", st.Tiers)
	}
	runCmd(t, time.Minute, e2e.bin, "flush", m.dir)
	if st, _ = status(); st.Agent.DirtyFiles != 0 || st.Agent.DirtyBytes != 0 {
		t.Errorf("dirty data after flush: %+v", st.Agent)
	}
	srv.stop(5 * time.Second)
	st, code = status()
	if code == 0 || st.Healthy || len(st.Problems) == 0 || !strings.Contains(st.Problems[0], "server does not answer") {
		t.Fatalf("status with the server gone: exit %d, %+v", code, st)
	}
	if st.LastError == nil {
		t.Errorf("status with the server gone shows no last error")
	}
}

// TestE2EStatusServer: `coopfs status --server` reports the policy, the
// connected clients and the load, and exit 1 for an unreachable server.
func TestE2EStatusServer(t *testing.T) {
	needFUSE(t)
	metrics := e2eFreeAddr(t)
	srv := startServer(t, t.TempDir(), "--policy", "directory", "--metrics", metrics)
	startMount(t, srv.addr)
	out, code := runTimed(t, 30*time.Second, e2e.bin, "status", "--json", "--server", srv.addr, "--secret-file", e2e.secret, "--metrics", metrics)
	var r serverReport
	if err := json.Unmarshal([]byte(out), &r); err != nil || code != 0 || !r.Healthy || r.Policy != "directory" || r.Clients == nil || *r.Clients != 1 {
		t.Fatalf("status --server: exit %d, %v:\n%s", code, err, out)
	}
	out, code = runTimed(t, 30*time.Second, e2e.bin, "status", "--server", e2eFreeAddr(t), "--secret-file", e2e.secret)
	if code == 0 || !strings.Contains(out, "NOT HEALTHY") {
		t.Fatalf("status --server of nothing: exit %d:\n%s", code, out)
	}
}

// TestDebPackage builds the Debian package around the test binary
// (deploy/deb/build.sh, what make deb runs) and checks what it holds: the
// binary, the helper mount(8) looks for, the units, the settings as
// conffiles and the man pages; the helper runs from the unpacked tree.
func TestDebPackage(t *testing.T) {
	needBinary(t)
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Skip("dpkg-deb missing (not a Debian system)")
	}
	out := t.TempDir()
	deb := strings.TrimSpace(runCmd(t, 5*time.Minute, "../../deploy/deb/build.sh", e2e.bin, "0.0.1-test", out))
	contents := runCmd(t, time.Minute, "dpkg-deb", "--contents", deb)
	for _, want := range []string{"./usr/bin/coopfs", "./usr/sbin/mount.fuse.coopfs -> ../bin/coopfs", "./usr/lib/systemd/system/coopfs-serve.service",
		"./usr/lib/systemd/system/coopfs-proxy.service", "./etc/coopfs/serve.env", "./usr/share/man/man1/coopfs-mount.1.gz",
		"./usr/share/man/man8/mount.fuse.coopfs.8.gz", "./usr/share/doc/coopfs/examples/fstab.example"} {
		if !strings.Contains(contents, want) {
			t.Errorf("the package lacks %s; contents:\n%s", want, contents)
		}
	}
	if conf := runCmd(t, time.Minute, "dpkg-deb", "--info", deb, "conffiles"); !strings.Contains(conf, "/etc/coopfs/serve.env") {
		t.Errorf("serve.env is not a conffile: %q", conf)
	}
	root := t.TempDir()
	runCmd(t, time.Minute, "dpkg-deb", "-x", deb, root)
	// The helper as installed, in fake mode (-f): it parses the fstab
	// options and prints the coopfs mount command line it would run.
	got, code := runTimed(t, time.Minute, filepath.Join(root, "usr/sbin/mount.fuse.coopfs"), "server:7000", "/mnt/x", "-fv", "-o", "_netdev,nofail,cache_size=1GiB,secret_file=/etc/coopfs/secret")
	if code != 0 || !strings.Contains(got, "--server=server:7000 --cache-size=1GiB --secret-file=/etc/coopfs/secret /mnt/x") {
		t.Errorf("the unpacked helper: exit %d: %s", code, got)
	}
}

// TestFstabSystemdGenerator runs systemd's own fstab generator on coopfs
// fstab lines: the mount unit it makes is a remote file system (so it
// waits for the network), which remote-fs.target only wants under nofail
// (a server down at boot fails that mount, not the boot) and requires
// without.
func TestFstabSystemdGenerator(t *testing.T) {
	const gen = "/usr/lib/systemd/system-generators/systemd-fstab-generator"
	if _, err := os.Stat(gen); err != nil {
		t.Skipf("%s missing: apt-get install systemd", gen)
	}
	for _, c := range []struct{ opts, dep string }{
		{"_netdev,nofail,secret_file=/etc/coopfs/secret,cache_size=1GiB", "remote-fs.target.wants"},
		{"_netdev,secret_file=/etc/coopfs/secret", "remote-fs.target.requires"},
		// Without _netdev a fuse.* line is a local file system, mounted
		// before the network is up: the docs say to always give _netdev.
		{"secret_file=/etc/coopfs/secret", "local-fs.target.requires"},
	} {
		dir := t.TempDir()
		fstab := filepath.Join(dir, "fstab")
		if err := os.WriteFile(fstab, []byte("srv:7000 /mnt/coopfs fuse.coopfs "+c.opts+" 0 0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "normal")
		for _, d := range []string{out, filepath.Join(dir, "early"), filepath.Join(dir, "late")} {
			os.Mkdir(d, 0o755)
		}
		cmd := exec.Command(gen, out, filepath.Join(dir, "early"), filepath.Join(dir, "late"))
		cmd.Env = append(os.Environ(), "SYSTEMD_FSTAB="+fstab, "SYSTEMD_PROC_CMDLINE=")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("systemd-fstab-generator: %v\n%s", err, b)
		}
		unit, err := os.ReadFile(filepath.Join(out, "mnt-coopfs.mount"))
		if err != nil || !strings.Contains(string(unit), "Type=fuse.coopfs") || !strings.Contains(string(unit), "What=srv:7000") {
			t.Fatalf("generated unit: %v\n%s", err, unit)
		}
		if _, err := os.Lstat(filepath.Join(out, c.dep, "mnt-coopfs.mount")); err != nil {
			t.Errorf("options %s: want the mount in %s: %v", c.opts, c.dep, err)
		}
	}
}

// TestE2EJournalPriorities: with stderr as the journal stream
// ($JOURNAL_STREAM names its device:inode, as systemd sets it), every log
// line of coopfs serve starts with its syslog priority; with stderr
// elsewhere, none does.
func TestE2EJournalPriorities(t *testing.T) {
	needBinary(t)
	for _, journal := range []bool{true, false} {
		f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
		if err != nil {
			t.Fatal(err)
		}
		var st syscall.Stat_t
		syscall.Fstat(int(f.Fd()), &st)
		stream := fmt.Sprintf("%d:%d", st.Dev, st.Ino)
		if !journal {
			stream = "1:1"
		}
		cmd := exec.Command(e2e.bin, "serve", "--export", "/nonexistent-export", "--listen", e2eFreeAddr(t), "--insecure")
		cmd.Stderr = f
		cmd.Env = append(os.Environ(), "JOURNAL_STREAM="+stream)
		cmd.Run()
		f.Close()
		b, _ := os.ReadFile(f.Name())
		var logLines int
		for l := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
			if !strings.Contains(l, " level=") {
				continue
			}
			logLines++
			if prefixed := strings.HasPrefix(l, "<") && strings.Contains(l, ">time="); prefixed != journal {
				t.Errorf("journal %v: line %q", journal, l)
			}
			if journal && strings.Contains(l, "level=WARN") && !strings.HasPrefix(l, "<4>") {
				t.Errorf("a warning without priority 4: %q", l)
			}
		}
		if logLines == 0 {
			t.Fatalf("journal %v: no log line in:\n%s", journal, b)
		}
	}
}

// TestE2EServeUnitCapabilities runs coopfs serve with exactly the
// capability bounding set of deploy/systemd/coopfs-serve.service (through
// setpriv, as systemd would bound it) and checks that what the unit says
// the server needs is enough: a user's create lands with the user's
// ownership (identity switching), client root may chown and make a device
// node, and trusted.* xattrs, whose CAP_SYS_ADMIN the unit leaves out, are
// refused.
func TestE2EServeUnitCapabilities(t *testing.T) {
	needFUSE(t)
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("setpriv missing: apt-get install util-linux")
	}
	unit, err := os.ReadFile("../../deploy/systemd/coopfs-serve.service")
	if err != nil {
		t.Fatal(err)
	}
	var caps []string
	for l := range strings.SplitSeq(string(unit), "\n") {
		if v, ok := strings.CutPrefix(l, "CapabilityBoundingSet="); ok {
			for c := range strings.FieldsSeq(v) {
				caps = append(caps, "+"+strings.ToLower(strings.TrimPrefix(c, "CAP_")))
			}
		}
	}
	if len(caps) == 0 {
		t.Fatal("no CapabilityBoundingSet= in coopfs-serve.service")
	}
	export := t.TempDir()
	os.Chmod(export, 0o777)
	via := []string{"setpriv", "--bounding-set", "-all," + strings.Join(caps, ","), "--inh-caps=-all"}
	srv := startServerVia(t, via, e2eFreeAddr(t), export)
	m := startMount(t, srv.addr)
	nobody := &syscall.Credential{Uid: 65534, Gid: 65534}
	cmd := exec.Command("sh", "-c", "echo x > "+m.path("by-nobody"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: nobody}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("create as nobody: %v %s", err, out)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(export, "by-nobody"), &st); err != nil || st.Uid != 65534 {
		t.Fatalf("nobody's file in the export: uid %d, %v (want 65534: the server acted as the caller)", st.Uid, err)
	}
	if err := os.WriteFile(m.path("by-root"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(m.path("by-root"), 65534, 65534); err != nil {
		t.Errorf("chown as client root: %v", err)
	}
	if err := syscall.Mknod(m.path("null"), syscall.S_IFCHR|0o644, 1<<8|3); err != nil {
		t.Errorf("mknod as client root: %v", err)
	}
	if err := syscall.Setxattr(m.path("by-root"), "trusted.x", []byte("1"), 0); err == nil {
		t.Errorf("a trusted.* xattr was set without CAP_SYS_ADMIN in the bounding set: is the bound applied?")
	}
}
