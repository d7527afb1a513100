package agent

import "github.com/coopfs/coopfs/internal/coord/hints"

// Test hooks of the hints policy (hints_test.go).

// ClosePeerListener closes a's peer listener and its peer connections, as
// if its peer side died while its server connection lives on.
func ClosePeerListener(a *Agent) {
	switch p := a.policy().(type) {
	case *hintsClient:
		p.peerNet.close()
	case *wholeClient:
		p.peerNet.close()
	}
}

// HintsPeerBoot returns the boot id a's hints policy knows for the client
// whose peer listener is listen (0: unknown).
func HintsPeerBoot(a *Agent, listen string) uint64 {
	h, ok := a.policy().(*hintsClient)
	if !ok {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.members {
		if m.Listen == listen {
			return m.Boot
		}
	}
	return 0
}

// BootID returns a's boot id.
func BootID(a *Agent) uint64 { return a.sess.hello.BootID }

// ForgetHintsPeers makes a's hints policy forget its peers, as if the
// server's messages of their joins had not reached it yet.
func ForgetHintsPeers(a *Agent) {
	h, ok := a.policy().(*hintsClient)
	if !ok {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for id := range h.members {
		h.hc.PeerFailed(hints.ClientID(id))
	}
	clear(h.members)
}
