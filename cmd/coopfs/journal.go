package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
)

// journalWriter returns stderr, or, when stderr is systemd's journal
// stream (systemd sets $JOURNAL_STREAM to its device:inode), a writer that
// starts every log line with its syslog priority (<3> error, <4> warning,
// <6> info, <7> debug), which journald records as the entry's priority:
// `journalctl -p warning -u coopfs-serve` then shows only what matters.
func journalWriter(stderr *os.File) io.Writer {
	stream := os.Getenv("JOURNAL_STREAM")
	if stream == "" {
		return stderr
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(stderr.Fd()), &st); err != nil || fmt.Sprintf("%d:%d", st.Dev, st.Ino) != stream {
		return stderr // stderr was redirected away from the journal
	}
	return priorityWriter{w: stderr}
}

// priorityWriter prefixes each line with the priority of its level= field.
type priorityWriter struct{ w io.Writer }

func (p priorityWriter) Write(b []byte) (int, error) {
	var out bytes.Buffer
	for line := range bytes.Lines(b) {
		out.WriteString(linePriority(string(line)))
		out.Write(line)
	}
	if _, err := p.w.Write(out.Bytes()); err != nil {
		return 0, err
	}
	return len(b), nil
}

// linePriority is the "<N>" prefix for a log line of slog's text format
// (time=... level=WARN msg=...), "" for other lines (default priority).
func linePriority(line string) string {
	_, rest, ok := strings.Cut(line, " level=")
	if !ok {
		return ""
	}
	lv, _, _ := strings.Cut(rest, " ")
	switch {
	case strings.HasPrefix(lv, "ERROR"):
		return "<3>"
	case strings.HasPrefix(lv, "WARN"):
		return "<4>"
	case strings.HasPrefix(lv, "INFO"):
		return "<6>"
	case strings.HasPrefix(lv, "DEBUG"):
		return "<7>"
	}
	return ""
}
