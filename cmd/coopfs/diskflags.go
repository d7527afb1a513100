package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/coopfs/coopfs/internal/block"
	"github.com/coopfs/coopfs/internal/cache/disk"
)

// diskFlags are the disk cache flags of mount and proxy (seed 003).
type diskFlags struct {
	dir          *string
	size         block.Size
	banks, assoc *int
}

func addDiskFlags(fs *flag.FlagSet) *diskFlags {
	d := &diskFlags{size: block.Size(disk.DefaultSize)}
	d.dir = fs.String("disk-cache", "", "persistent disk cache directory under the memory cache (seed 003); none if empty")
	fs.Var(&d.size, "disk-cache-size", "disk cache size (block data), e.g. 20GiB; rounded down to whole sets")
	d.banks = fs.Int("disk-banks", 0, "disk cache bank files (default 64, fewer for a small cache)")
	d.assoc = fs.Int("disk-assoc", 0, "disk cache ways per set, at least 2 (default 16, fewer for a small cache)")
	return d
}

// check refuses --disk-* flags given without --disk-cache.
func (d *diskFlags) check(fs *flag.FlagSet) error {
	if *d.dir != "" {
		return nil
	}
	var stray []string
	fs.Visit(func(f *flag.Flag) {
		if strings.HasPrefix(f.Name, "disk-") {
			stray = append(stray, "--"+f.Name)
		}
	})
	if len(stray) > 0 {
		return fmt.Errorf("%s given without --disk-cache DIR: add --disk-cache DIR to use a disk cache", strings.Join(stray, ", "))
	}
	return nil
}
