package wire

// lockSampleMsgs are the round-trip samples of the types 90–99.
func lockSampleMsgs() []Msg {
	l := Lock{Type: LockWrite, Start: 10, End: LockEOF, Pid: 77}
	return []Msg{
		&LockSet{Handle: 1, Owner: 1 << 63, Flock: true, Wait: true, Lock: l},
		&LockTest{Handle: 2, Owner: 3, Lock: l},
		&LockReply{Lock: Lock{Type: LockUnlock}},
		&LockRelease{Handle: 4, Owner: 5, Flock: true},
		&LockCancel{Handle: 6, Owner: 7},
		&WriteSeq{Seq: 9, Handle: 1, Offset: 4096, Data: []byte("once")},
		&OpenPinned{Path: "a/f", Flags: 0, Ino: 12, Gen: 34},
		&LookupPinned{Path: "a/f"},
		&WriteBase{Seq: 10, Handle: 1, Offset: 8192, Base: 77, Data: []byte("kept")},
		&WriteReply{Attr: Attr{Ino: 5, Size: 8196, Version: 78}, Prev: 77},
		&ParentAttrs{},
		&EntryReply{Open: true, HasAttr: true, Handle: 9, Attr: Attr{Ino: 3, Size: 5}, HasParent: true, Parent: Attr{Ino: 2, Mode: 0o40755}},
		&EntryReply{HasAttr: true, Attr: Attr{Ino: 4}},
		&EntryReply{HasParent: true, Parent: Attr{Ino: 1, Nlink: 3}},
		&As{UID: 5, GID: 6, Groups: []uint32{7}, Msg: &Commit{Seq: 1, Handle: 2, Data: []byte("xy"), Ops: []CommitOp{{Len: 2}}, Release: []uint64{}}},
		&Commit{Seq: 3, Handle: 4, Data: []byte("abcdef"), Release: []uint64{9, 1 << 33}, Ops: []CommitOp{
			{Offset: 0, Len: 4},
			{Attr: &SetAttr{Valid: SetMode | SetMtime, Mode: 0o640, Mtime: -5}},
			{Offset: 1 << 40, Len: 2},
			{Attr: &SetAttr{Valid: SetUID | SetGID, UID: 7, GID: 8}},
		}},
	}
}
