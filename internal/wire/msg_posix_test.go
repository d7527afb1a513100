package wire

import (
	"errors"
	"testing"
)

func posixSamples() []Msg {
	return []Msg{
		&As{UID: 1000, GID: 100, Groups: []uint32{100, 27}, Msg: &Lookup{Path: "a/b"}},
		&As{UID: 1000, GID: 100, Groups: []uint32{100}, HasUmask: true, Umask: 0o022, Msg: &Mkdir{Path: "d", Mode: 0o777}},
		&As{UID: 0, GID: 0, Groups: []uint32{}, Msg: &SetAttr{Path: "p", Valid: SetMode, Mode: 0o4755}},
		&Mknod{Path: "fifo", Mode: 0o10644, Rdev: 0},
		&GetXattr{Path: "f", Name: "user.x", Size: 100},
		&ListXattr{Path: "f", Size: 0},
		&SetXattr{Path: "f", Name: "system.posix_acl_access", Value: []byte{2, 0, 0, 0}, Flags: 1, Ino: 9, Gen: 10},
		&RemoveXattr{Path: "f", Name: "user.x", Ino: 11, Gen: 12},
		&XattrReply{Size: 3, Value: []byte("abc")},
		&Fallocate{Handle: 3, Mode: 1, Offset: 4096, Length: 1 << 20},
	}
}

// As wraps only requests without a data section, and never another As.
func TestAsRejectsNestingAndData(t *testing.T) {
	for _, inner := range []Msg{&As{Msg: &Ping{}}, &Write{Handle: 1}} {
		e := encoder{}
		m := &As{UID: 1, Msg: inner}
		m.encode(&e)
		var got As
		d := decoder{b: e.b}
		got.decode(&d)
		if err := d.done(); !errors.Is(err, ErrMalformed) {
			t.Errorf("As{%v} decoded: %v, want malformed", inner.Type(), err)
		}
	}
}
