package obs

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// ParseLevel parses a log level name: debug, info, warn (or warning), error.
// Use it to validate a --log-level flag before calling NewLogger.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		return slog.LevelDebug, nil
	case "", "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return slog.LevelInfo, fmt.Errorf("unknown log level %q: want debug, info, warn or error", s)
}

// NewLogger returns a logger writing slog's text format to w at the given
// level. An unknown level logs at info and says so in a first warning line;
// validate flags with ParseLevel to reject it instead.
func NewLogger(w io.Writer, level string) *slog.Logger {
	lv, err := ParseLevel(level)
	l := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: lv}))
	if err != nil {
		l.Warn("logging at info", "err", err)
	}
	return l
}
