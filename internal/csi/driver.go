package csi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DriverName is the CSI driver's name (a PersistentVolume's csi.driver).
const DriverName = "csi.coopfs.io"

// Version is the driver's vendor version.
const Version = "0.1.0"

// Mounter mounts and unmounts coopfs: the driver's only contact with the
// system, so that tests run the real one.
type Mounter interface {
	// Mount mounts the server at target with the mount helper's -o
	// options and returns once the mount is up, or its one-line error.
	Mount(ctx context.Context, server, target string, opts []string) error
	// Unmount unmounts target.
	Unmount(target string) error
	// IsMounted reports whether a coopfs mount is at target.
	IsMounted(target string) (bool, error)
}

// Config configures the driver.
type Config struct {
	Endpoint string // the unix socket to listen on: unix:///csi/csi.sock or a path
	NodeID   string // NodeGetInfo's node id
	StateDir string // where the secrets and the published volumes' records are kept (0700)
	Mounter  Mounter
	Logger   *slog.Logger
}

func (c *Config) validate() error {
	switch {
	case c.Endpoint == "":
		return errors.New("csi: no endpoint: give --endpoint unix:///PATH")
	case c.NodeID == "":
		return errors.New("csi: no node id: give --node-id")
	case c.StateDir == "":
		return errors.New("csi: no state directory: give --state-dir")
	case c.Mounter == nil:
		return errors.New("csi: no mounter")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Driver serves the Identity and Node services.
type Driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedNodeServer
	csi.UnimplementedControllerServer
	cfg  Config
	vols *volumes // the Controller service's volumes (controller.go)
	log  *slog.Logger
	// mu serialises publishes and unpublishes: kubelet may retry one while
	// the first is still mounting, and two mounts on one target must not race.
	mu sync.Mutex
}

// New returns a driver; Serve runs it.
func New(cfg Config) (*Driver, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("csi: state directory: %w", err)
	}
	vols, err := loadVolumes(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	return &Driver{cfg: cfg, log: cfg.Logger, vols: vols}, nil
}

// Listen opens the endpoint's unix socket (removing a stale one).
func (d *Driver) Listen() (net.Listener, error) {
	path := strings.TrimPrefix(strings.TrimPrefix(d.cfg.Endpoint, "unix://"), "unix:")
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("csi: endpoint: %w", err)
	}
	os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("csi: endpoint: %w", err)
	}
	return ln, nil
}

// Serve serves the CSI services on ln until ctx ends.
func (d *Driver) Serve(ctx context.Context, ln net.Listener) error {
	srv := grpc.NewServer(grpc.UnaryInterceptor(d.logCall))
	csi.RegisterIdentityServer(srv, d)
	csi.RegisterNodeServer(srv, d)
	csi.RegisterControllerServer(srv, d)
	go func() {
		<-ctx.Done()
		srv.GracefulStop()
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return fmt.Errorf("csi: serve: %w", err)
	}
	return nil
}

// logCall logs every call and its outcome.
func (d *Driver) logCall(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	resp, err := h(ctx, req)
	if err != nil {
		d.log.Warn("csi call failed", "method", info.FullMethod, "err", err)
	} else {
		d.log.Info("csi call", "method", info.FullMethod)
	}
	return resp, err
}

// GetPluginInfo implements csi.IdentityServer.
func (d *Driver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: DriverName, VendorVersion: Version}, nil
}

// GetPluginCapabilities implements csi.IdentityServer: the Controller
// service (volumes from a StorageClass), no topology.
func (d *Driver) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{{
		Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{Type: csi.PluginCapability_Service_CONTROLLER_SERVICE}},
	}}}, nil
}

// Probe implements csi.IdentityServer.
func (d *Driver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

// NodeGetCapabilities implements csi.NodeServer: no staging, no stats.
func (d *Driver) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	return &csi.NodeGetCapabilitiesResponse{}, nil
}

// NodeGetInfo implements csi.NodeServer.
func (d *Driver) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: d.cfg.NodeID}, nil
}

// Volume attributes and secrets the driver reads.
const (
	AttrServer = "server" // HOST:PORT of the coopfs server (required)
	SecretKey  = "secret" // the cluster secret's content
)

// mountOptions turns a volume's attributes into the helper's -o options:
// every attribute but server (and the CO's own csi.storage.k8s.io/*) is a
// coopfs mount flag, cache_size=... or cache-size=...; the helper refuses
// unknown ones.
func mountOptions(attrs map[string]string, readOnly bool) ([]string, error) {
	var opts []string
	for _, k := range slices.Sorted(maps.Keys(attrs)) {
		if k == AttrServer || strings.Contains(k, "/") {
			continue
		}
		v := attrs[k]
		switch strings.ReplaceAll(k, "-", "_") {
		case "secret_file", "log_file":
			// The driver's own: the secret comes from the CSI secrets and
			// the log goes to the volume's state directory.
			return nil, fmt.Errorf("volume attribute %s is set by the driver; give the secret in the node-publish secret %q", k, SecretKey)
		}
		if strings.ContainsAny(k+v, ",") {
			return nil, fmt.Errorf("volume attribute %s=%q: commas are not allowed", k, v)
		}
		opts = append(opts, k+"="+v)
	}
	if readOnly {
		opts = append(opts, "ro")
	}
	return opts, nil
}

// stateDir is the directory of one publish (secret and record), named
// after the volume and the target.
func (d *Driver) stateDir(volumeID, target string) string {
	sum := sha256.Sum256([]byte(volumeID + "\x00" + target))
	return filepath.Join(d.cfg.StateDir, hex.EncodeToString(sum[:12]))
}

func statusErr(c codes.Code, format string, a ...any) error {
	return status.Errorf(c, format, a...)
}
