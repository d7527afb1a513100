package obs

import "github.com/coopfs/coopfs/internal/wire"

// WireObserver counts a connection's messages and bytes on m, with kind
// (KindServer, KindPeer, KindClient) naming the process at the other end.
// It implements wire.Observer.
type WireObserver struct {
	M    *Metrics
	Kind string
}

// Message implements wire.Observer.
func (o WireObserver) Message(dir string, t wire.Type, n int) {
	o.M.countTyped(uint8(t), t, dir, n)
	if dir == DirIn {
		o.M.CountIn(o.Kind, n)
	} else {
		o.M.CountOut(o.Kind, n)
	}
}
