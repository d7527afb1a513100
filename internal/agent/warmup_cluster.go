package agent

import (
	"context"
	"errors"
)

// ClusterProgress is the state of a cluster warm-up as the server reports
// it to the initiator.
type ClusterProgress struct {
	Clients, ClientsDone int
	Bytes, TotalBytes    int64    // over every client: TotalBytes is the files' size times the clients
	Phase                string   // "shares" (each client its share, from the server), "peers" (the rest, from peers), "done"
	Names                []string // the clients taking part
}

// WarmCluster warms items on a set of clients together (names; empty:
// every connected client).
func (a *Agent) WarmCluster(ctx context.Context, items []WarmItem, names []string, progress func(ClusterProgress)) (ClusterProgress, error) {
	return ClusterProgress{}, errors.New("not yet")
}
