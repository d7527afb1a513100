package csi

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

// The Controller service provisions volumes from a StorageClass: a volume
// is a name bound to the class's parameters (server and mount options),
// and every volume of a class is the server's whole export, shared. There
// is nothing to create or delete on the server (DeleteVolume removes the
// binding, never data) and nothing to attach. The bindings are kept in
// the state directory, so that a restarted controller knows its volumes.

// volumes is the controller's state: volume name → its parameters.
type volumes struct {
	mu   sync.Mutex
	path string
	byID map[string]map[string]string // the volume id is its name
}

func loadVolumes(dir string) (*volumes, error) {
	v := &volumes{path: filepath.Join(dir, "volumes.json"), byID: map[string]map[string]string{}}
	b, err := os.ReadFile(v.path)
	switch {
	case os.IsNotExist(err):
		return v, nil
	case err != nil:
		return nil, fmt.Errorf("csi: read the volumes: %w", err)
	}
	if err := json.Unmarshal(b, &v.byID); err != nil {
		return nil, fmt.Errorf("csi: %s: %w", v.path, err)
	}
	return v, nil
}

// saveLocked writes the volumes (temp file and rename); v.mu is held.
func (v *volumes) saveLocked() error {
	b, err := json.Marshal(v.byID)
	if err != nil {
		return err
	}
	tmp := v.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, v.path)
}

// ControllerGetCapabilities implements csi.ControllerServer.
func (d *Driver) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: []*csi.ControllerServiceCapability{{
		Type: &csi.ControllerServiceCapability_Rpc{Rpc: &csi.ControllerServiceCapability_RPC{Type: csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME}},
	}}}, nil
}

// checkCaps refuses block access: coopfs is a file system.
func checkCaps(caps []*csi.VolumeCapability) error {
	if len(caps) == 0 {
		return statusErr(codes.InvalidArgument, "volume capabilities missing")
	}
	for _, c := range caps {
		if c.GetBlock() != nil {
			return statusErr(codes.InvalidArgument, "coopfs is a file system: block access is not supported")
		}
	}
	return nil
}

// CreateVolume implements csi.ControllerServer: it binds the name to the
// class's parameters, which must name the server. The capacity is not
// enforced (the export's own), so it is reported as unknown (0).
func (d *Driver) CreateVolume(_ context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	name := req.GetName()
	if name == "" {
		return nil, statusErr(codes.InvalidArgument, "volume name missing")
	}
	if err := checkCaps(req.GetVolumeCapabilities()); err != nil {
		return nil, err
	}
	if req.GetVolumeContentSource() != nil {
		return nil, statusErr(codes.InvalidArgument, "coopfs volumes cannot be made from a snapshot or another volume")
	}
	params := req.GetParameters()
	if params[AttrServer] == "" {
		return nil, statusErr(codes.InvalidArgument, "StorageClass parameter %q missing: the coopfs server's HOST:PORT", AttrServer)
	}
	if _, err := mountOptions(params, false); err != nil {
		return nil, statusErr(codes.InvalidArgument, "%v", err)
	}
	v := d.vols
	v.mu.Lock()
	defer v.mu.Unlock()
	if prev, ok := v.byID[name]; ok && !maps.Equal(prev, params) {
		return nil, statusErr(codes.AlreadyExists, "volume %q exists with other parameters", name)
	}
	v.byID[name] = maps.Clone(params)
	if err := v.saveLocked(); err != nil {
		return nil, statusErr(codes.Internal, "save the volumes: %v", err)
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: name, VolumeContext: maps.Clone(params)}}, nil
}

// DeleteVolume implements csi.ControllerServer: it forgets the binding
// (an unknown volume is success, as the spec wants).
func (d *Driver) DeleteVolume(_ context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, statusErr(codes.InvalidArgument, "volume id missing")
	}
	v := d.vols
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, ok := v.byID[req.GetVolumeId()]; !ok {
		return &csi.DeleteVolumeResponse{}, nil
	}
	delete(v.byID, req.GetVolumeId())
	if err := v.saveLocked(); err != nil {
		return nil, statusErr(codes.Internal, "save the volumes: %v", err)
	}
	return &csi.DeleteVolumeResponse{}, nil
}

// ValidateVolumeCapabilities implements csi.ControllerServer.
func (d *Driver) ValidateVolumeCapabilities(_ context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if req.GetVolumeId() == "" {
		return nil, statusErr(codes.InvalidArgument, "volume id missing")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, statusErr(codes.InvalidArgument, "volume capabilities missing")
	}
	d.vols.mu.Lock()
	_, ok := d.vols.byID[req.GetVolumeId()]
	d.vols.mu.Unlock()
	if !ok {
		return nil, statusErr(codes.NotFound, "no volume %q", req.GetVolumeId())
	}
	if err := checkCaps(req.GetVolumeCapabilities()); err != nil {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: err.Error()}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeCapabilities: req.GetVolumeCapabilities(), VolumeContext: req.GetVolumeContext(), Parameters: req.GetParameters()}}, nil
}
