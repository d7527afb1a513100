package agent

import (
	"context"
	"errors"
	"syscall"
	"time"

	"github.com/coopfs/coopfs/internal/wire"
)

// Write delegations (internal/server/recall.go): a file with dirty data
// here is declared to the server with DelegateWrite, so that another
// client's open of it recalls the data first — a CallbackBreak of kind
// CallbackWrite, answered once the file is written back. After a
// write-back the delegation is returned (DelegateReturn). On every new
// connection the dirty files are declared again (the server forgot them
// with the old one).

// delegate declares df's unflushed writes to the server, before the write
// that made it dirty returns. A server without delegations (or a mount
// without callbacks) answers EOPNOTSUPP or ENOSYS: close-to-open across
// clients then holds only after a flush, and the agent says so once.
func (w *writeBack) delegate(ctx context.Context, ino uint64) bool {
	_, _, err := w.a.sess.call(ctx, &wire.DelegateWrite{Ino: ino}, true)
	switch {
	case err == nil:
	case errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENOSYS):
		w.noDeleg.Do(func() {
			w.a.log.Warn("write-back: the server grants no write delegations (no callbacks): other clients see this client's writes only after they are written back", "err", err)
		})
	default:
		w.a.log.Warn("write-back: declaring unflushed writes to the server failed; it is tried again on the next connection", "file", ino, "err", err)
		return false
	}
	return true
}

// declareAll declares inos and then, when every declaration went through,
// tells the server that nothing else is unflushed here (wire.SettledIno):
// what this client's name left orphaned before a restart and it did not
// declare is released.
func (w *writeBack) declareAll(ctx context.Context, inos []uint64) {
	for _, ino := range inos {
		if !w.delegate(ctx, ino) {
			return
		}
	}
	w.a.sess.call(ctx, &wire.DelegateReturn{Ino: wire.SettledIno}, true)
}

// giveBack returns df's delegation after its write-back, in the background.
func (w *writeBack) giveBack(ino uint64) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), w.a.cfg.RequestTimeout)
		defer cancel()
		w.a.sess.call(ctx, &wire.DelegateReturn{Ino: ino}, true)
	}()
}

// reconnected declares every dirty file again on a new connection.
func (w *writeBack) reconnected() {
	if w == nil {
		return
	}
	w.mu.Lock()
	inos := make([]uint64, 0, len(w.files))
	for ino := range w.files {
		inos = append(inos, ino)
	}
	w.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(len(inos)+1)*w.a.cfg.RequestTimeout)
		defer cancel()
		w.declareAll(ctx, inos)
	}()
}

// recall answers the server's recall of write delegations: the files named
// are written back before the break is acked, so the opener that caused
// it sees their data.
func (w *writeBack) recall(ctx context.Context, m *wire.CallbackBreak) {
	if w == nil || m.Kind != wire.CallbackWrite {
		return
	}
	for _, it := range m.Items {
		w.mu.Lock()
		df := w.files[it.Ino]
		w.mu.Unlock()
		if df == nil {
			continue
		}
		w.recalls.Add(1)
		for try := 0; try < 3; try++ {
			if _, err := w.flushFile(ctx, df, nil); err != nil {
				w.a.log.Warn("write-back: a recalled file could not be written back", "file", it.Ino, "err", err)
				break
			}
			df.mu.Lock()
			gone := df.gone
			df.mu.Unlock()
			if gone {
				break
			}
		}
	}
}
