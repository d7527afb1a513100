package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
)

// runSecret implements `coopfs secret FILE`: 32 random bytes (256 bits),
// hex-encoded, in a new file readable only by its owner.
func runSecret(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("secret", "FILE\n\nWrites a new cluster secret (256 random bits, hex) to FILE, mode 0600. Copy FILE to\n"+
		"every server and client and give it with --secret-file.", stderr)
	force := fs.Bool("force", false, "overwrite FILE if it exists")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "coopfs secret: want exactly one FILE")
		fs.Usage()
		return errUsage
	}
	path := fs.Arg(0)
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fmt.Errorf("random bytes: %w", err)
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if *force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%s exists; give --force to replace it (every end then needs the new one)", path)
		}
		return err
	}
	if _, err := fmt.Fprintln(f, hex.EncodeToString(b[:])); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote a 256-bit cluster secret to %s (mode 0600); give every server and client --secret-file %s\n", path, path)
	return nil
}
