package wire

// metaSampleMsgs are the round-trip samples of the types 160–169.
func metaSampleMsgs() []Msg {
	return []Msg{
		&OpenRead{Path: "a/b.go", Flags: 0, Max: 128 << 10, Lazy: true},
		&As{UID: 1, GID: 2, Groups: []uint32{}, Msg: &OpenRead{Path: "c"}},
		&OpenData{Handle: 7, Attr: Attr{Ino: 3, Size: 4, Version: 1 << 63}, HasData: true, Layer: LayerDisk, Data: []byte("abcd")},
		&OpenData{Attr: Attr{Ino: 9, Mode: 0o100644}},
	}
}
