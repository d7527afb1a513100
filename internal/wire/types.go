package wire

// Attr is a file's metadata as the server reports it.
type Attr struct {
	Ino     uint64 // server file id: st_ino of the exported file
	Mode    uint32 // st_mode: type and permission bits
	Nlink   uint32
	UID     uint32
	GID     uint32
	Size    uint64
	Blocks  uint64 // 512-byte blocks
	Atime   int64  // nanoseconds since the epoch
	Mtime   int64
	Ctime   int64
	Rdev    uint32
	Version uint64 // commit counter: changes whenever the content changes
	Gen     uint64 // generation: tells apart files that reuse one inode number (0: unknown)
}

// DirEntry is one directory entry.
type DirEntry struct {
	Name string
	Ino  uint64
	Mode uint32 // type bits only are guaranteed
}

// StatFs is the exported file system's statfs.
type StatFs struct {
	Blocks, Bfree, Bavail uint64
	Files, Ffree          uint64
	Bsize, NameLen        uint32
	Frsize                uint32
}

// SetAttr masks: which fields of a SetAttr request apply.
const (
	SetMode uint32 = 1 << iota
	SetUID
	SetGID
	SetSize
	SetAtime
	SetMtime
	SetAtimeNow
	SetMtimeNow
)
