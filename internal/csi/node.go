package csi

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

// NodePublishVolume implements csi.NodeServer: it mounts the volume's
// server at the target path. Publishing again what is published there is
// success (the spec's idempotency); a different volume there is
// AlreadyExists.
func (d *Driver) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	id, target := req.GetVolumeId(), req.GetTargetPath()
	switch {
	case id == "":
		return nil, statusErr(codes.InvalidArgument, "volume id missing")
	case target == "":
		return nil, statusErr(codes.InvalidArgument, "target path missing")
	case req.GetVolumeCapability() == nil:
		return nil, statusErr(codes.InvalidArgument, "volume capability missing")
	case req.GetVolumeCapability().GetBlock() != nil:
		return nil, statusErr(codes.InvalidArgument, "coopfs is a file system: block access is not supported")
	}
	server := req.GetVolumeContext()[AttrServer]
	if server == "" {
		return nil, statusErr(codes.InvalidArgument, "volume attribute %q missing: the coopfs server's HOST:PORT", AttrServer)
	}
	opts, err := mountOptions(req.GetVolumeContext(), req.GetReadonly())
	if err != nil {
		return nil, statusErr(codes.InvalidArgument, "%v", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	state := d.stateDir(id, target)
	record := server + "\n" + strings.Join(opts, ",") + "\n"
	mounted, err := d.cfg.Mounter.IsMounted(target)
	if err != nil {
		return nil, statusErr(codes.Internal, "target %s: %v", target, err)
	}
	if mounted {
		if prev, err := os.ReadFile(filepath.Join(state, "record")); err == nil && string(prev) == record {
			return &csi.NodePublishVolumeResponse{}, nil
		}
		return nil, statusErr(codes.AlreadyExists, "target %s holds another coopfs mount (or this volume with other attributes)", target)
	}
	secret := req.GetSecrets()[SecretKey]
	if secret == "" {
		return nil, statusErr(codes.InvalidArgument, "secret %q missing from the node publish secrets: the cluster secret (coopfs secret FILE)", SecretKey)
	}
	if err := os.MkdirAll(state, 0o700); err != nil {
		return nil, statusErr(codes.Internal, "state directory: %v", err)
	}
	secretFile := filepath.Join(state, "secret")
	if err := os.WriteFile(secretFile, []byte(secret), 0o600); err != nil {
		return nil, statusErr(codes.Internal, "write the secret: %v", err)
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return nil, statusErr(codes.Internal, "target %s: %v", target, err)
	}
	opts = append(opts, "secret_file="+secretFile, "log_file="+filepath.Join(state, "mount.log"))
	if err := d.cfg.Mounter.Mount(ctx, server, target, opts); err != nil {
		os.RemoveAll(state)
		return nil, statusErr(codes.Internal, "%v", err) // the helper names the server and target
	}
	if err := os.WriteFile(filepath.Join(state, "record"), []byte(record), 0o600); err != nil {
		return nil, statusErr(codes.Internal, "record the publish: %v", err)
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

// NodeUnpublishVolume implements csi.NodeServer: it unmounts the target
// and removes it. A target that is not mounted (or gone) is success.
func (d *Driver) NodeUnpublishVolume(ctx context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	id, target := req.GetVolumeId(), req.GetTargetPath()
	switch {
	case id == "":
		return nil, statusErr(codes.InvalidArgument, "volume id missing")
	case target == "":
		return nil, statusErr(codes.InvalidArgument, "target path missing")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	mounted, err := d.cfg.Mounter.IsMounted(target)
	if err != nil {
		return nil, statusErr(codes.Internal, "target %s: %v", target, err)
	}
	if mounted {
		if err := d.cfg.Mounter.Unmount(target); err != nil {
			return nil, statusErr(codes.Internal, "unmount %s: %v", target, err)
		}
	}
	// The spec: the plugin removes the target path it created.
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, statusErr(codes.Internal, "remove target %s: %v", target, err)
	}
	if err := os.RemoveAll(d.stateDir(id, target)); err != nil {
		return nil, statusErr(codes.Internal, "state directory: %v", err)
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}
