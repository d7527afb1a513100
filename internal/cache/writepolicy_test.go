package cache

import "testing"

func TestWritePolicyParse(t *testing.T) {
	for _, p := range []WritePolicy{ReadOnly, WriteThrough, WriteBack} {
		got, err := ParseWritePolicy(p.String())
		if err != nil || got != p {
			t.Errorf("ParseWritePolicy(%q) = %v, %v", p.String(), got, err)
		}
	}
	var p WritePolicy
	if err := p.Set("writeback"); err == nil {
		t.Error("Set(writeback) accepted a misspelling")
	}
	if p != WriteThrough {
		t.Errorf("zero value %v, want write-through", p)
	}
}
