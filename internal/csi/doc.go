// Package csi is coopfs's Kubernetes CSI node driver: the Identity and
// Node services of the Container Storage Interface over a unix socket.
// NodePublishVolume mounts a coopfs server at the pod's target path through
// the mount helper (`mount.fuse.coopfs`, which starts `coopfs mount` as a
// daemon and returns once the mount is up), with the volume's attributes
// as mount options and the cluster secret from the CSI secrets written to a
// 0600 file; NodeUnpublishVolume unmounts it. Both are idempotent, as the
// CSI spec requires. There is no Controller service: volumes are
// pre-provisioned (a PersistentVolume names the server) or inline.
package csi
