package csi

import (
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

const testSecret = "csi-test-cluster-secret-0123456789abcdef"

// needRoot skips unless FUSE mounts can be made here.
func needRoot(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root (FUSE mounts)")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("needs /dev/fuse")
	}
}

// buildCoopfs builds the coopfs binary (or copies $COOPFS_E2E_BIN).
func buildCoopfs(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "coopfs")
	if pre := os.Getenv("COOPFS_E2E_BIN"); pre != "" {
		if out, err := exec.Command("cp", pre, bin).CombinedOutput(); err != nil {
			t.Fatalf("copy %s: %v %s", pre, err, out)
		}
		return bin
	}
	if out, err := exec.Command("go", "build", "-o", bin, "../../cmd/coopfs").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startServer runs a real `coopfs serve` of export and returns its address.
func startServer(t *testing.T, bin, export string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte(testSecret), 0o600)
	cmd := exec.Command(bin, "serve", "--export", export, "--listen", addr, "--secret-file", secret, "--squash", "none")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() })
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("server at %s not up: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startDriver serves the real driver on a unix socket in a temp dir.
func startDriver(t *testing.T, bin string) string {
	t.Helper()
	dir := t.TempDir()
	sock := filepath.Join(dir, "csi.sock")
	d, err := New(Config{Endpoint: "unix://" + sock, NodeID: "node-1", StateDir: filepath.Join(dir, "state"), Mounter: HelperMounter{Bin: bin}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := d.Listen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	return sock
}

// TestSanity runs csi-sanity (kubernetes-csi/csi-test), the whole suite,
// against the driver and a real server: its volume lifecycle specs create
// a volume from the StorageClass parameters, publish it (a real FUSE
// mount), unpublish and delete it.
func TestSanity(t *testing.T) {
	needRoot(t)
	bin := buildCoopfs(t)
	addr := startServer(t, bin, t.TempDir())
	sock := startDriver(t, bin)
	base := t.TempDir()
	secrets := filepath.Join(base, "secrets.yaml")
	os.WriteFile(secrets, []byte("NodePublishVolumeSecret:\n  secret: "+testSecret+"\n"), 0o600)
	cfg := sanity.NewTestConfig()
	cfg.Address = "unix://" + sock
	cfg.TargetPath = filepath.Join(base, "target")
	cfg.StagingPath = filepath.Join(base, "staging")
	cfg.SecretsFile = secrets
	cfg.TestVolumeParameters = map[string]string{AttrServer: addr}
	sanity.GinkgoTest(&cfg)
	gomega.RegisterFailHandler(ginkgo.Fail)
	suite, reporter := ginkgo.GinkgoConfiguration()
	ginkgo.RunSpecs(t, "coopfs CSI sanity", suite, reporter)
}

// TestPublishUnpublish publishes a real volume twice (idempotent), reads
// through it, refuses a different volume on the same target, and
// unpublishes twice.
func TestPublishUnpublish(t *testing.T) {
	needRoot(t)
	bin := buildCoopfs(t)
	export := t.TempDir()
	os.WriteFile(filepath.Join(export, "data"), []byte("pod data\n"), 0o644)
	addr := startServer(t, bin, export)
	sock := startDriver(t, bin)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	node := csi.NewNodeClient(conn)
	ctx := context.Background()
	target := filepath.Join(t.TempDir(), "pods", "vol", "mount")
	t.Cleanup(func() { exec.Command("umount", "-l", target).Run() })
	mountCap := &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER}}
	req := &csi.NodePublishVolumeRequest{VolumeId: "vol-1", TargetPath: target, VolumeCapability: mountCap,
		VolumeContext: map[string]string{AttrServer: addr, "cache_size": "64MiB"}, Secrets: map[string]string{SecretKey: testSecret}}
	for i := range 2 {
		if _, err := node.NodePublishVolume(ctx, req); err != nil {
			t.Fatalf("publish %d: %v", i+1, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(target, "data")); err != nil || string(b) != "pod data\n" {
		t.Fatalf("read through the published volume: %q, %v", b, err)
	}
	other := proto.Clone(req).(*csi.NodePublishVolumeRequest)
	other.VolumeContext = map[string]string{AttrServer: addr, "cache_size": "32MiB"}
	if _, err := node.NodePublishVolume(ctx, other); status.Code(err) != codes.AlreadyExists {
		t.Errorf("publish of other attributes on a published target: %v, want AlreadyExists", err)
	}
	bad := proto.Clone(req).(*csi.NodePublishVolumeRequest)
	bad.TargetPath = target + "-2"
	bad.Secrets = nil
	if _, err := node.NodePublishVolume(ctx, bad); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "secret") {
		t.Errorf("publish without the secret: %v, want InvalidArgument naming the secret", err)
	}
	bad.Secrets = map[string]string{SecretKey: "wrong-secret-wrong-secret-wrong-secret!!"}
	if _, err := node.NodePublishVolume(ctx, bad); status.Code(err) != codes.Internal {
		t.Errorf("publish with a wrong secret: %v, want Internal (the mount's error)", err)
	} else {
		t.Logf("wrong secret: %v", err)
	}
	// A volume attribute must not point the mount at a file of its own
	// choosing: the secret and the log are the driver's.
	bad.Secrets = map[string]string{SecretKey: testSecret}
	bad.VolumeContext = map[string]string{AttrServer: addr, "secret_file": "/etc/shadow"}
	if _, err := node.NodePublishVolume(ctx, bad); status.Code(err) != codes.InvalidArgument {
		t.Errorf("publish with a secret_file attribute: %v, want InvalidArgument", err)
	}
	un := &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-1", TargetPath: target}
	for i := range 2 {
		if _, err := node.NodeUnpublishVolume(ctx, un); err != nil {
			t.Fatalf("unpublish %d: %v", i+1, err)
		}
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Errorf("target still there after unpublish: %v", err)
	}
}

// TestDeployManifests parses deploy/kubernetes: every document is a
// Kubernetes object, the driver name is the driver's, and every coopfs
// volume names its server.
func TestDeployManifests(t *testing.T) {
	files, _ := filepath.Glob("../../deploy/kubernetes/*.yaml")
	if len(files) == 0 {
		t.Fatal("no manifests in deploy/kubernetes")
	}
	kinds := map[string]int{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(strings.NewReader(string(b)))
		for {
			var doc struct {
				APIVersion  string `yaml:"apiVersion"`
				Kind        string `yaml:"kind"`
				Metadata    struct{ Name string }
				Provisioner string            `yaml:"provisioner"`
				Parameters  map[string]string `yaml:"parameters"`
				Spec        struct {
					CSI *struct {
						Driver           string            `yaml:"driver"`
						VolumeAttributes map[string]string `yaml:"volumeAttributes"`
					} `yaml:"csi"`
				} `yaml:"spec"`
			}
			if err := dec.Decode(&doc); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if doc.APIVersion == "" || doc.Kind == "" || doc.Metadata.Name == "" {
				t.Errorf("%s: a document without apiVersion, kind or name: %+v", f, doc)
			}
			kinds[doc.Kind]++
			switch {
			case doc.Kind == "CSIDriver" && doc.Metadata.Name != DriverName,
				doc.Kind == "StorageClass" && (doc.Provisioner != DriverName || doc.Parameters[AttrServer] == ""),
				doc.Kind == "PersistentVolume" && (doc.Spec.CSI == nil || doc.Spec.CSI.Driver != DriverName || doc.Spec.CSI.VolumeAttributes[AttrServer] == ""):
				t.Errorf("%s: %s %s does not name driver %s and a server", f, doc.Kind, doc.Metadata.Name, DriverName)
			}
		}
	}
	for _, k := range []string{"CSIDriver", "DaemonSet", "Deployment", "StorageClass", "PersistentVolume", "PersistentVolumeClaim"} {
		if kinds[k] == 0 {
			t.Errorf("no %s in deploy/kubernetes", k)
		}
	}
}
