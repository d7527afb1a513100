// Package vfs holds the types a mount and a file system backend share: who
// asks (Caller, carried in the context), what a setattr changes (SetAttrIn)
// and what an open file offers (File). The FUSE adapter (internal/fusefs)
// and the client library (internal/agent) both depend on it; neither
// depends on the other.
package vfs
