package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/coopfs/coopfs/internal/csi"
	"github.com/coopfs/coopfs/internal/obs"
)

// runCSI implements `coopfs csi`: the Kubernetes CSI driver.
func runCSI(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("csi", "[flags]\n\nServes the CSI Identity, Node and Controller services: run it as a DaemonSet beside the node-driver-registrar, and beside the csi-provisioner for volumes from a StorageClass (deploy/kubernetes, docs/operations.md).", stderr)
	endpoint := fs.String("endpoint", "unix:///csi/csi.sock", "the unix socket kubelet talks to")
	host, _ := os.Hostname()
	nodeID := fs.String("node-id", host, "this node's id (in Kubernetes: the node name, from the downward API)")
	stateDir := fs.String("state-dir", "/var/lib/coopfs-csi", "where the volumes' secrets (0600) and mount logs are kept")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("unexpected argument %q (coopfs csi takes only flags)", fs.Arg(0))
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this program (the mount helper): %w", err)
	}
	log := obs.NewLogger(stderr, *logLevel)
	d, err := csi.New(csi.Config{Endpoint: *endpoint, NodeID: *nodeID, StateDir: *stateDir,
		Mounter: csi.HelperMounter{Bin: self}, Logger: log})
	if err != nil {
		return err
	}
	ln, err := d.Listen()
	if err != nil {
		return err
	}
	log.Info("csi node driver serving", "endpoint", *endpoint, "node_id", *nodeID, "driver", csi.DriverName)
	notifyReady(log)
	return d.Serve(ctx, ln)
}
