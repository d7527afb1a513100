// Package csi is coopfs's Kubernetes CSI node driver: the Identity and
// Node services of the Container Storage Interface over a unix socket.
// NodePublishVolume mounts a coopfs server at the pod's target path through
// the mount helper (`mount.fuse.coopfs`, which starts `coopfs mount` as a
// daemon and returns once the mount is up), with the volume's attributes
// as mount options and the cluster secret from the CSI secrets written to a
// 0600 file; NodeUnpublishVolume unmounts it. Both are idempotent, as the
// CSI spec requires. The Controller service provisions volumes from a
// StorageClass: a volume binds a name to the class's parameters (the
// server and mount options), the export shared; a PersistentVolume can
// also name the server itself (pre-provisioned).
package csi
