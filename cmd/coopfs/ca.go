package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/coopfs/coopfs/internal/wire"
)

// runCA implements `coopfs ca init` and `coopfs ca issue NAME`: a cluster
// certificate authority kept in a directory, and the certificates it signs
// for servers and clients.
func runCA(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "init" && args[0] != "issue") {
		fmt.Fprintln(stderr, "Usage: coopfs ca init [--dir DIR]\n       coopfs ca issue [--dir DIR] [--host H,...] NAME\n\n"+
			"init makes the cluster CA (DIR/ca.crt, DIR/ca.key); issue signs a certificate for NAME\n"+
			"(DIR/NAME.crt, DIR/NAME.key) that names NAME and every --host (DNS names or IP addresses).\n"+
			"A dialer checks that the other end's certificate names the host it dialed.")
		return errUsage
	}
	if args[0] == "init" {
		return caInit(args[1:], stdout, stderr)
	}
	return caIssue(args[1:], stdout, stderr)
}

func caInit(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("ca init", "[--dir DIR]", stderr)
	dir := fs.String("dir", "coopfs-ca", "directory for the CA's certificate and key")
	name := fs.String("name", "coopfs cluster CA", "the CA's common name")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return errUsage
	}
	crt, key := filepath.Join(*dir, "ca.crt"), filepath.Join(*dir, "ca.key")
	if _, err := os.Stat(key); err == nil {
		return fmt.Errorf("%s exists: a CA is already there (remove it to start over; every certificate it issued stops working)", key)
	}
	ca, err := wire.NewCA(*name)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return err
	}
	if err := writeNew(key, ca.Key, 0o600); err != nil {
		return err
	}
	if err := writeNew(crt, ca.Cert, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "made the cluster CA: %s (give it to every end as --tls-ca) and %s (keep it secret)\n", crt, key)
	return nil
}

func caIssue(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("ca issue", "[--dir DIR] [--host H,...] NAME", stderr)
	dir := fs.String("dir", "coopfs-ca", "the CA's directory (from `coopfs ca init`); the certificate is written there")
	hosts := fs.String("host", "", "comma-separated DNS names and IP addresses the certificate also names (the addresses others dial: --listen of a server or a client's peer listener)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 || fs.Arg(0) == "" || strings.ContainsAny(fs.Arg(0), "/\\") {
		fmt.Fprintln(stderr, "coopfs ca issue: want exactly one NAME (no slashes)")
		fs.Usage()
		return errUsage
	}
	name := fs.Arg(0)
	var ca wire.PEMPair
	var err error
	if ca.Cert, err = os.ReadFile(filepath.Join(*dir, "ca.crt")); err == nil {
		ca.Key, err = os.ReadFile(filepath.Join(*dir, "ca.key"))
	}
	if err != nil {
		return fmt.Errorf("read the CA in %s: %w (run `coopfs ca init --dir %s` first)", *dir, err, *dir)
	}
	var hl []string
	for _, h := range strings.Split(*hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hl = append(hl, h)
		}
	}
	p, err := wire.Issue(ca, name, hl)
	if err != nil {
		return err
	}
	crt, key := filepath.Join(*dir, name+".crt"), filepath.Join(*dir, name+".key")
	if err := writeNew(key, p.Key, 0o600); err != nil {
		return err
	}
	if err := writeNew(crt, p.Cert, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "issued %s: --tls-cert %s --tls-key %s --tls-ca %s\n", name, crt, key, filepath.Join(*dir, "ca.crt"))
	return nil
}

// writeNew writes a file that must not exist yet.
func writeNew(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%s exists; remove it first", path)
		}
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
