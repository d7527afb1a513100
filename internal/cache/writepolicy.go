package cache

import "fmt"

// WritePolicy says what a cache does with writes (seed 003): refuse them,
// pass them to the origin before they complete, or complete them locally
// and write them back later. Mounts and proxies share it.
type WritePolicy uint8

// The write policies. The zero value is WriteThrough.
const (
	WriteThrough WritePolicy = iota // a write reaches the origin before it returns
	ReadOnly                        // writes fail with EROFS
	WriteBack                       // writes complete in dirty disk frames, written back later
)

var policyNames = [...]string{WriteThrough: "write-through", ReadOnly: "read-only", WriteBack: "write-back"}

// String returns the policy's flag spelling.
func (p WritePolicy) String() string {
	if int(p) < len(policyNames) {
		return policyNames[p]
	}
	return fmt.Sprintf("WritePolicy(%d)", uint8(p))
}

// ParseWritePolicy parses read-only, write-through or write-back.
func ParseWritePolicy(s string) (WritePolicy, error) {
	for p, name := range policyNames {
		if s == name {
			return WritePolicy(p), nil
		}
	}
	return 0, fmt.Errorf("unknown write policy %q: use read-only, write-through or write-back", s)
}

// Set implements flag.Value.
func (p *WritePolicy) Set(s string) error {
	v, err := ParseWritePolicy(s)
	if err != nil {
		return err
	}
	*p = v
	return nil
}
