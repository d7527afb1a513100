// Package wbjournal is the crash-safe record of where write-back data
// goes, shared by the write-back mounts (internal/agent) and the
// write-back proxy (internal/proxy).
//
// A write-back cache keeps dirty blocks as dirty frames of the disk tier
// (cache/disk), which tag each frame with file, block and version and find
// them again after a crash. What a frame does not say is where the file
// is written back and as whom: that is a Record (the version the frames
// are tagged with, the writer's identity, the path), journaled and synced
// before the file's first dirty frame is written. After a restart Recover
// pairs the disk tier's dirty frames with their records: every dirty frame
// with a record of the same version is placed; one without is kept, and
// reported, since it cannot be written back.
package wbjournal
