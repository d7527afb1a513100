package wire

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
)

// TestPathPastTheLimit: a request naming a path longer than MaxPath fails
// at the sender with ENAMETOOLONG and the connection goes on; one of
// MaxPath bytes reaches the handler; an error whose text names long paths
// comes back cut, and decodes.
func TestPathPastTheLimit(t *testing.T) {
	h := HandlerFunc(func(ctx context.Context, c *Conn, m Msg) (Msg, error) {
		r, ok := m.(*Rename)
		if !ok {
			return &OK{}, nil
		}
		return nil, fmt.Errorf("rename %s %s: %w", r.Old, r.New, syscall.EXDEV)
	})
	cli, _, err := pair(t, plain(""), plain(""), h, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	long := strings.Repeat("p", MaxPath+1)
	if _, err := cli.Call(ctx, &Lookup{Path: long}); !errors.Is(err, syscall.ENAMETOOLONG) {
		t.Fatalf("lookup of a path past the limit: %.200v, want ENAMETOOLONG", err)
	}
	if _, err := cli.Call(ctx, &Lookup{Path: long[1:]}); err != nil {
		t.Fatalf("lookup of a path at the limit, after one past it: %.200v", err)
	}
	_, err = cli.Call(ctx, &Rename{Old: long[1:], New: long[1:]})
	var re *RemoteError
	if !errors.As(err, &re) || re.Errno != syscall.EXDEV || len(re.Msg) > maxErrorMsg+len("…") {
		t.Fatalf("an error naming two long paths: %.200v (%d bytes of text), want EXDEV cut to %d bytes", err, len(err.Error()), maxErrorMsg)
	}
}
