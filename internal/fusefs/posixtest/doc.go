// Package posixtest is a POSIX behaviour suite for a mounted directory, in
// the spirit of go-fuse's posixtest: Run executes every case as a subtest,
// each in a fresh subdirectory, comparing results and errno values with what
// a local Linux file system gives. It is run against the coopfs mount (with
// the in-memory test backend in internal/fusefs and with the real agent in
// end-to-end tests); it can also be pointed at a local directory to check the
// suite itself.
package posixtest
