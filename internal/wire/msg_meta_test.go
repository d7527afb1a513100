package wire

// metaSampleMsgs are the round-trip samples of the types 160–169.
func metaSampleMsgs() []Msg {
	return []Msg{
		&OpenRead{Path: "a/b.go", Flags: 0, Max: 128 << 10, Lazy: true},
		&As{UID: 1, GID: 2, Groups: []uint32{}, Msg: &OpenRead{Path: "c"}},
		&OpenData{Handle: 7, Attr: Attr{Ino: 3, Size: 4, Version: 1 << 63}, HasData: true, Layer: LayerDisk, Data: []byte("abcd")},
		&OpenData{Attr: Attr{Ino: 9, Mode: 0o100644}},
		&DirDelegate{Path: "a/b", Reserve: 8},
		&DirDelegated{Granted: true, Verdict: MayCreate | MayRemove, Attr: Attr{Ino: 2, Mode: 0o40755},
			Reserved: []Reserved{{Token: 1, Attr: Attr{Ino: 77, Gen: 5}}, {Token: 2, Attr: Attr{Ino: 78}}}},
		&DirDelegated{Reserved: []Reserved{}},
		&DirReturn{Inos: []uint64{2, 1 << 40}},
		&EntryBatch{Seq: 4, Ops: []EntryOp{{Path: "a/b/c"}, {Path: "a/b", Dir: true}}, Release: []uint64{}},
		&EntryDone{Done: 1, Errno: 13, Msg: "permission denied"},
		&As{UID: 3, GID: 4, Groups: []uint32{}, HasUmask: true, Umask: 0o22, Msg: &CommitNew{Token: 9, Path: "a/b/f", Mode: 0o644, Seq: 7,
			Ops: []CommitOp{{Len: 3}, {Attr: &SetAttr{Valid: SetMtime, Mtime: 5}}}, Release: []uint64{1}, Data: []byte("abc")}},
		&CommitNew{Token: 1, Path: "x", Ops: []CommitOp{}, Release: []uint64{}},
	}
}
