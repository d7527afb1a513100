package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// runMan implements `coopfs man DIR`: it writes the man pages, generated
// from the commands' own help, so that they never disagree with -h:
// coopfs(1), coopfs-COMMAND(1) for every command and mount.fuse.coopfs(8).
func runMan(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("man", "DIR\n\nWrites coopfs.1, coopfs-COMMAND.1 and mount.fuse.coopfs.8 (roff) into DIR.", stderr)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "coopfs man: want exactly one DIR")
		fs.Usage()
		return errUsage
	}
	dir := fs.Arg(0)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var index strings.Builder
	manHeader(&index, "COOPFS", 1, "coopfs", "a cooperative-caching distributed file system")
	index.WriteString(".SH SYNOPSIS\n.B coopfs\n.I COMMAND\n[flags] [args]\n.SH COMMANDS\n")
	for _, c := range commands() {
		if c.run == nil || c.name == "man" {
			continue
		}
		fmt.Fprintf(&index, ".TP\n.B %s\n%s (see \\fBcoopfs-%s\\fR(1))\n", c.name, roffEscape(c.summary), c.name)
		var page strings.Builder
		manHeader(&page, "COOPFS-"+strings.ToUpper(c.name), 1, "coopfs-"+c.name, c.summary)
		commandPage(ctx, &page, c)
		if err := os.WriteFile(filepath.Join(dir, "coopfs-"+c.name+".1"), []byte(page.String()), 0o644); err != nil {
			return err
		}
	}
	index.WriteString(".SH SEE ALSO\n\\fBmount.fuse.coopfs\\fR(8), /usr/share/doc/coopfs\n")
	if err := os.WriteFile(filepath.Join(dir, "coopfs.1"), []byte(index.String()), 0o644); err != nil {
		return err
	}
	var helper strings.Builder
	manHeader(&helper, "MOUNT.FUSE.COOPFS", 8, helperName, "mount helper for coopfs (mount -t fuse.coopfs, /etc/fstab)")
	helper.WriteString(".SH SYNOPSIS\n.B mount.fuse.coopfs\n.I SERVER:PORT DIR\n[\\-sfnv] [\\-o OPTIONS]\n" +
		".SH DESCRIPTION\nRun by \\fBmount\\fR(8) for file systems of type \\fBfuse.coopfs\\fR. It starts \\fBcoopfs mount\\fR as a daemon " +
		"and exits 0 once the mount is up, or prints one line saying why it failed and exits 32. " +
		"The generic options (defaults, noauto, nofail, _netdev, x\\-systemd.*, rw, nosuid, nodev, noatime, ...) are left to mount(8) and systemd; " +
		"\\fBro\\fR is write_policy=read\\-only; \\fBlog_file=PATH\\fR sends the daemon's log there (default: syslog, or /var/log/coopfs). " +
		"Every other option is a flag of \\fBcoopfs mount\\fR, with _ or \\- between words:\n.SH OPTIONS\n")
	if flags, err := mountFlagInfo(); err == nil {
		for _, f := range flags {
			name := strings.ReplaceAll(f.Name, "-", "_")
			if !f.Bool {
				name += "=VALUE"
			}
			fmt.Fprintf(&helper, ".TP\n.B %s\n%s\n", roffEscape(name), roffEscape(f.Usage))
		}
	}
	helper.WriteString(".SH EXAMPLE\n.nf\ncoopfs.example.org:7000 /mnt/coopfs fuse.coopfs _netdev,nofail,secret_file=/etc/coopfs/secret,cache_size=4GiB 0 0\n.fi\n" +
		".SH SEE ALSO\n\\fBcoopfs\\-mount\\fR(1), \\fBcoopfs\\-status\\fR(1), \\fBfstab\\fR(5), \\fBsystemd.mount\\fR(5)\n")
	if err := os.WriteFile(filepath.Join(dir, helperName+".8"), []byte(helper.String()), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote the man pages into %s\n", dir)
	return nil
}

func manHeader(b *strings.Builder, title string, section int, name, summary string) {
	fmt.Fprintf(b, ".TH %s %d \"\" \"coopfs\" \"coopfs manual\"\n.SH NAME\n%s \\- %s\n", title, section, roffEscape(name), roffEscape(summary))
}

// commandPage writes a command's page: its flags from describeFlags when
// it has one flag set, else its -h output as it is (commands with
// subcommands).
func commandPage(ctx context.Context, b *strings.Builder, c command) {
	var help bytes.Buffer
	c.run(ctx, []string{"-h"}, &help, &help)
	fmt.Fprintf(b, ".SH SYNOPSIS\n.nf\n%s.fi\n", roffEscape(firstParagraph(help.String())))
	var out bytes.Buffer
	c.run(ctx, []string{describeFlagsArg}, io.Discard, &out)
	var flags []flagInfo
	if json.Unmarshal(out.Bytes(), &flags) == nil && len(flags) > 0 {
		b.WriteString(".SH OPTIONS\n")
		for _, f := range flags {
			def := ""
			if f.Default != "" && f.Default != "false" && f.Default != "0" {
				def = " (default " + f.Default + ")"
			}
			fmt.Fprintf(b, ".TP\n.B \\-\\-%s\n%s%s\n", roffEscape(f.Name), roffEscape(f.Usage), roffEscape(def))
		}
		return
	}
	fmt.Fprintf(b, ".SH DESCRIPTION\n.nf\n%s.fi\n", roffEscape(help.String()))
}

// firstParagraph is the usage's first lines, up to the first blank line.
func firstParagraph(s string) string {
	p, _, _ := strings.Cut(s, "\n\n")
	return p + "\n"
}

// roffEscape escapes backslashes, and leading dots and quotes that roff
// would take for requests.
func roffEscape(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'") {
			lines[i] = `\&` + l
		}
	}
	return strings.Join(lines, "\n")
}
