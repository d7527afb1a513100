// Package nullfs is a do-nothing go-fuse file system: one read-only file of
// a given size whose content is a fixed pattern served from one
// preallocated buffer (no per-read allocation, no copy). It is the ceiling
// that coopfs's memory-cache reads are compared with ("coopfs / do-nothing
// go-fuse"), so it mounts through fusefs.MountNode with exactly the options
// of the coopfs mount (fusefs.MountOptions), read-ahead raised the same way.
package nullfs
