package fusefs

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// MountEntry is one mount of this process's mount namespace, from
// /proc/self/mountinfo.
type MountEntry struct {
	Dev    string // major:minor of the mounted file system
	Dir    string // the mount point, unescaped
	FSType string
}

// Mounts lists the mounts of this process's mount namespace, in the order
// the kernel gives them (a later mount on the same point is on top).
func Mounts() ([]MountEntry, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []MountEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superopts
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		m := MountEntry{Dev: fields[2], Dir: unescapeMountinfo(fields[4])}
		for i := 5; i+1 < len(fields); i++ {
			if fields[i] == "-" {
				m.FSType = fields[i+1]
				break
			}
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// MountsUnder lists the mount points at or below dir (an absolute,
// symlink-free path).
func MountsUnder(dir string) ([]string, error) {
	ms, err := Mounts()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range ms {
		if m.Dir == dir || strings.HasPrefix(m.Dir, dir+"/") {
			out = append(out, m.Dir)
		}
	}
	return out, nil
}

// IsMountPoint reports whether a file system is mounted at dir (an
// absolute, symlink-free path).
func IsMountPoint(dir string) (bool, error) {
	_, ok, err := mountInfo(dir)
	return ok, err
}

// mountInfo returns the major:minor of the mount at dir, if there is one.
func mountInfo(dir string) (dev string, ok bool, err error) {
	ms, err := Mounts()
	if err != nil {
		return "", false, err
	}
	for _, m := range ms {
		if m.Dir == dir {
			dev, ok = m.Dev, true // the last (topmost) mount wins
		}
	}
	return dev, ok, nil
}

// unescapeMountinfo undoes the octal escapes (\040 for space) of mountinfo.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
