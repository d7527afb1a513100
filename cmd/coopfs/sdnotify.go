package main

import (
	"log/slog"

	"github.com/coreos/go-systemd/v22/daemon"
)

// notifyReady tells the service manager that the process is ready (the
// server and the proxy listen, the mount is up): READY=1 on $NOTIFY_SOCKET,
// as systemd's Type=notify units and the mount helper (mounthelper.go)
// wait for. Without $NOTIFY_SOCKET it does nothing.
func notifyReady(log *slog.Logger) {
	sent, err := daemon.SdNotify(false, daemon.SdNotifyReady)
	switch {
	case err != nil:
		// The process works without its manager knowing; say so once.
		log.Warn("cannot tell the service manager we are ready", "err", err)
	case sent:
		log.Debug("told the service manager we are ready")
	}
}
