package wire

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"reflect"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coopfs/coopfs/internal/block"
)

func sampleMsgs() []Msg {
	attr := Attr{Ino: 7, Mode: 0o100644, Nlink: 1, UID: 1000, GID: 100, Size: 1 << 40,
		Blocks: 8, Atime: -5, Mtime: 1e18, Ctime: 3, Rdev: 0, Version: 99, Gen: 12345}
	return append([]Msg{
		&Hello{Version: 1, Role: RoleClient, Name: "a", BootID: 5, Listen: "1.2.3.4:5", Nonce: bytes.Repeat([]byte{1}, 32), Session: bytes.Repeat([]byte{2}, SessionIDSize)},
		&HelloReply{Version: 1, Nonce: []byte{2}, Proof: []byte{3}, BlockSize: 1 << 20, Policy: "none", BootID: 9},
		&Auth{Proof: []byte{4, 5}},
		&Welcome{ClientID: 3, Session: bytes.Repeat([]byte{3}, SessionIDSize)},
		&Error{Errno: 2, Msg: "no such file"},
		&OK{}, &Ping{},
		&Lookup{Path: "a/b"}, &GetAttr{Path: "x", Handle: 3},
		&SetAttr{Path: "p", Handle: 1, Valid: SetSize | SetMode, Mode: 0o600, UID: 1, GID: 2, Size: 10, Atime: 1, Mtime: -1, Ino: 77, Gen: 1 << 40},
		&ReadDir{Path: "d", Offset: 100},
		&Mkdir{Path: "d", Mode: 0o755, UID: 1, GID: 1},
		&Create{Path: "f", Flags: 0o101, Mode: 0o644, UID: 1, GID: 1},
		&Open{Path: "f", Flags: 2}, &Unlink{Path: "f"}, &Rmdir{Path: "d"},
		&Rename{Old: "a", New: "b", Flags: 1}, &Link{Old: "a", New: "c", Ino: 5, Gen: 6},
		&Symlink{Target: "../t", Path: "l", UID: 3, GID: 4}, &Readlink{Path: "l"},
		&StatFsReq{}, &Release{Handle: 8}, &Fsync{Handle: 8, DataOnly: true},
		&AttrReply{Attr: attr}, &OpenReply{Handle: 4, Attr: attr},
		&ReadDirReply{Entries: []DirEntry{{Name: "x", Ino: 1, Mode: 0o40000}, {Name: "y", Ino: 2}}, More: true},
		&ReadlinkReply{Target: "t"},
		&CallbackRegister{}, &CallbackBreak{Kind: CallbackRead, Cause: 1 << 31, Items: []BreakItem{{Ino: 5}, {Ino: 6, Name: "x"}, {Ino: 7, Name: BreakEntries}}},
		&DelegateWrite{Ino: 9, Path: "d/f"}, &DelegateReturn{Ino: 10},
		&WarmupStart{Clients: []string{"a", "b"}, UID: 1000, GID: 100, Items: []WarmupItem{{Path: "d/f", Off: 1 << 20, Len: 4 << 20, Size: 9 << 20}, {Path: "g", Size: 7}}},
		&WarmupStart{}, &WarmupStarted{Job: 3, Clients: []string{"a"}},
		&WarmupAssign{Job: 3, Phase: WarmupPeers, Seq: 2, UID: 1, GID: 2, Items: []WarmupItem{{Path: "x", Size: 1}}, From: []string{"h:1"}},
		&WarmupReport{Job: 3, Seq: 2, Bytes: 1 << 30, Done: true, Err: "x: permission denied"},
		&WarmupStatus{Job: 3}, &WarmupState{Phase: WarmupDone, ClientsDone: 2, Names: []string{"a", "b"}, Bytes: 10, TotalBytes: 20, Err: "e"},
		&Revalidate{Items: []RevalidateItem{{Path: "a/b", Ino: 3, Version: 4, Mtime: -5, Ctime: 6}, {Path: "", Ino: 1, Version: 2, List: true}}},
		&RevalidateReply{Status: []uint8{RevalidSame, RevalidChanged, RevalidGone}, Attrs: []Attr{attr}},
		&CallbackBreak{Kind: CallbackRead, All: true, Items: []BreakItem{}},
		&ReadDirPlus{Path: "d", Offset: 7}, &ReleaseBatch{Handles: []uint64{1, 1 << 40, 3}},
		&ReadDirPlusReply{Entries: []DirEntryPlus{
			{DirEntry: DirEntry{Name: "x", Ino: 7, Mode: 0o100644}, HasAttr: true, Attr: attr},
			{DirEntry: DirEntry{Name: "gone", Ino: 9, Mode: 0o40000}},
		}, More: true},
		&StatFsReply{StatFs: StatFs{Blocks: 1, Bfree: 2, Bavail: 3, Files: 4, Ffree: 5, Bsize: 4096, NameLen: 255, Frsize: 4096}},
		&ReadBlock{Handle: 1, File: 2, Index: 3, Version: 4, Token: 5, Retry: 6},
		&BlockReply{Version: 4, Size: 100, Layer: 1, Data: []byte("hello")},
		&BlockReply{Forwarded: true, Holder: 2, Digest: bytes.Repeat([]byte{7}, 32)},
		&PeerReport{Holder: 2, File: 1, Index: 2, Version: 3, Reason: "digest"},
		&Write{Handle: 1, Offset: 4096, Data: []byte("world")},
		&Forward{File: 1, Index: 2, Version: 3, Requester: 4, RequesterAddr: "h:1", Token: 5},
		&PeerData{Token: 5, File: 1, Index: 2, Version: 3, Size: 10, Holder: 2, Data: []byte("d")},
		&PeerNack{Token: 5, File: 1, Index: 2, Holder: 2, Reason: "gone"},
		&Discard{Blocks: []block.ID{{File: 1, Index: 2}, {File: 3, Index: 4}}, OnDemand: true},
		&PeerWait{Token: 9, File: 1, Index: 2, Holder: 3},
		&Held{Blocks: []block.ID{{File: 1, Index: 2}, {File: 3, Index: 4}}},
		&HintsPeers{Members: []HintsMember{{ID: 1, Boot: 2, Listen: "h:1"}, {ID: 3, Boot: 4}}, You: 3, Seq: 1 << 62},
		&HintsPeers{Members: []HintsMember{{ID: 5, Boot: 6, Listen: "h:5"}}, You: 1, Delta: true, Gone: []uint32{2, 4}, Seq: 7},
		&HintsOpen{Handle: 1, File: 2, Version: 3}, &HintsExport{File: 9},
		&HintsReply{From: 2, FromBoot: 5, Version: 3, Hints: []BlockHintMsg{{Index: 1, Holder: 2, Boot: 3, Since: -4}},
			Digests: []BlockDigestMsg{{Index: 1, Digest: bytes.Repeat([]byte{7}, 32)}}},
		&HintsRead{File: 1, Index: 2, Version: 3, Hops: 1, From: 4, FromBoot: 5},
		&HintsBlock{Kind: HintsHere, Version: 3, Master: true, Holder: 2, Boot: 9, Data: []byte("b")},
		&HintsBlock{Kind: HintsTry, To: 4, ToBoot: 6, ToAddr: "h:2"},
		&HintsForward{File: 1, Index: 2, Version: 3, Stamp: 44, FromOldest: -1 << 62, From: 1, FromBoot: 2, Data: []byte("f")},
		&HintsForwardAck{Oldest: 5, Boot: 6, Kept: true},
		&HintsDiscard{File: 1, Index: 2, Version: 3, Stamp: 4, Data: []byte("d")},
		&HintsDigest{Handle: 1, File: 2, Index: 3, Version: 4, Count: 8},
		&HintsDigestRep{Version: 4, Digests: []BlockDigestMsg{{Index: 3, Digest: bytes.Repeat([]byte{1}, 32)}}},
		&WholeOpen{Handle: 1, File: 2, Version: 3, Have: true}, &WholeOpen{NoData: true},
		&WholeOpenReply{Version: 3, Commit: 9, Holders: []WholeHolder{{ID: 2, Listen: "h:2"}},
			Digests: []BlockDigestMsg{{Index: 0, Digest: bytes.Repeat([]byte{5}, 32)}}, Fetchers: []WholeHolder{{ID: 4, Listen: "h:4"}}},
		&WholeOpenReply{Version: 1, Commit: 2},
		&WholeDigests{Handle: 1, File: 2, Version: 3, Index: 64, Count: 1024},
		&WholeDigestsRep{Version: 3, Digests: []BlockDigestMsg{{Index: 64, Digest: bytes.Repeat([]byte{6}, 32)}}}, &WholeDigestsRep{Version: 4},
		&WholeHave{Handle: 3, File: 1, Version: 2}, &WholeDrop{File: 4},
		&WholeCommit{Handle: 1, File: 2, Opened: 3, Version: 4, Whole: true},
		&WholeCommitRep{Commit: 5, Valid: true},
		&WholeRead{File: 1, Version: 2, Index: 3, Count: 4, Wait: 2500},
		&WholeData{Version: 2, Lens: []uint32{3, 1}, Data: []byte("abcd")},
	}, append(append(posixSamples(), lockSampleMsgs()...), metaSampleMsgs()...)...)
}

func roundTrip(t *testing.T, m Msg) Msg {
	t.Helper()
	head, data := appendFrame(nil, m, FlagReply, 42)
	var buf bytes.Buffer
	buf.Write(head)
	buf.Write(data)
	h, got, err := readFrame(bufio.NewReader(&buf), make([]byte, HeaderSize), DefaultLimits)
	if err != nil {
		t.Fatalf("%v: %v", m.Type(), err)
	}
	if h.id != 42 || h.flags != FlagReply || h.typ != m.Type() {
		t.Fatalf("%v: header %+v", m.Type(), h)
	}
	return got
}

func TestRoundTripEveryMessage(t *testing.T) {
	seen := map[Type]bool{}
	for _, m := range sampleMsgs() {
		got := roundTrip(t, m)
		if !reflect.DeepEqual(got, m) {
			t.Errorf("%v: got %+v, want %+v", m.Type(), got, m)
		}
		seen[m.Type()] = true
	}
	for typ := Type(0); typ < 255; typ++ {
		if newMsg(typ) != nil && !seen[typ] {
			t.Errorf("type %v has no round-trip sample", typ)
		}
	}
}

func TestDecoderRejects(t *testing.T) {
	good, data := appendFrame(nil, &BlockReply{Version: 1, Data: []byte("abc")}, FlagReply, 1)
	frame := append(append([]byte{}, good...), data...)
	read := func(b []byte, lim Limits) error {
		_, _, err := readFrame(bufio.NewReader(bytes.NewReader(b)), make([]byte, HeaderSize), lim)
		return err
	}
	if err := read(frame, DefaultLimits); err != nil {
		t.Fatalf("good frame: %v", err)
	}
	bad := append([]byte{}, frame...)
	bad[len(bad)-1] ^= 0xff
	if err := read(bad, DefaultLimits); !errors.Is(err, ErrChecksum) {
		t.Errorf("flipped data byte: %v, want ErrChecksum", err)
	}
	bad = append([]byte{}, frame...)
	bad[0] = 0
	if err := read(bad, DefaultLimits); !errors.Is(err, ErrBadMagic) {
		t.Errorf("bad magic: %v", err)
	}
	if err := read(frame, Limits{MaxMeta: 100, MaxData: 2}); !errors.Is(err, ErrFrameTooLarge) {
		t.Errorf("oversized: %v", err)
	}
	bad = append([]byte{}, frame...)
	bad[2] = 200
	if err := read(bad, DefaultLimits); !errors.Is(err, ErrUnknownType) {
		t.Errorf("unknown type: %v", err)
	}
	// Data on a type that carries none.
	head, _ := appendFrame(nil, &Ping{}, 0, 1)
	bad = append(append([]byte{}, head...), 'x')
	bad[8] = 1
	bad[12], bad[13], bad[14], bad[15] = byte(Checksum([]byte("x"))), byte(Checksum([]byte("x"))>>8), byte(Checksum([]byte("x"))>>16), byte(Checksum([]byte("x"))>>24)
	if err := read(bad, DefaultLimits); !errors.Is(err, ErrMalformed) {
		t.Errorf("data on Ping: %v", err)
	}
	if err := read(frame[:len(frame)-1], DefaultLimits); err == nil {
		t.Errorf("truncated frame accepted")
	}
}

func FuzzDecode(f *testing.F) {
	for _, m := range sampleMsgs() {
		head, data := appendFrame(nil, m, 0, 1)
		f.Add(append(append([]byte{}, head...), data...))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		lim := Limits{MaxMeta: 1 << 16, MaxData: 1 << 16}
		_, m, err := readFrame(bufio.NewReader(bytes.NewReader(b)), make([]byte, HeaderSize), lim)
		if err != nil {
			return
		}
		// Whatever decodes must encode and decode to the same message.
		if got := roundTrip(t, m); !reflect.DeepEqual(got, m) {
			t.Fatalf("re-decode differs: %+v vs %+v", got, m)
		}
	})
}

// pair makes two handshaken Conns over real loopback TCP.
func pair(t *testing.T, serverSec, clientSec *Security, srvHandler, cliHandler Handler) (*Conn, *Conn, error) {
	t.Helper()
	shs, chs, serr, cerr := handshakePair(t, serverSec, clientSec, "localhost", nil)
	if cerr != nil || serr != nil {
		return nil, nil, errors.Join(cerr, serr)
	}
	if chs.Reply.BlockSize != 4096 || chs.Welcome.ClientID != 1 {
		t.Fatalf("handshake values: %+v %+v", chs.Reply, chs.Welcome)
	}
	c := NewConn(chs.Conn, chs.Reader, ConnConfig{Handler: cliHandler})
	s := NewConn(shs.Conn, shs.Reader, ConnConfig{Handler: srvHandler})
	t.Cleanup(func() { c.Close(); s.Close() })
	return c, s, nil
}

// plain is an --insecure Security with an optional secret.
func plain(secret string) *Security {
	return MustSecurity(SecurityConfig{Secret: []byte(secret), Insecure: true})
}

// withTLS is a TLS Security proving secret.
func withTLS(secret string) *Security {
	return MustSecurity(SecurityConfig{Secret: []byte(secret)})
}

func TestHandshakeSecrets(t *testing.T) {
	cases := []struct {
		name     string
		srv, cli *Security
		ok       bool
	}{
		{"insecure, both none", plain(""), plain(""), true},
		{"insecure, same", plain("s3cret"), plain("s3cret"), true},
		{"insecure, different", plain("s3cret"), plain("other"), false},
		{"insecure, client lacks", plain("s3cret"), plain(""), false},
		{"insecure, server lacks", plain(""), plain("s3cret"), false},
		{"tls, same", withTLS("s3cret"), withTLS("s3cret"), true},
		{"tls, different", withTLS("s3cret"), withTLS("other"), false},
	}
	for _, tc := range cases {
		_, _, err := pair(t, tc.srv, tc.cli, nil, nil)
		if tc.ok && err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if !tc.ok && !errors.Is(err, ErrAuth) {
			t.Errorf("%s: err = %v, want ErrAuth", tc.name, err)
		}
	}
}

func TestConcurrentCallsBothDirections(t *testing.T) {
	echo := HandlerFunc(func(ctx context.Context, c *Conn, m Msg) (Msg, error) {
		switch m := m.(type) {
		case *ReadBlock:
			return &BlockReply{Version: m.Version, Data: bytes.Repeat([]byte{byte(m.Index)}, int(m.Index)*100)}, nil
		case *Lookup:
			return nil, &RemoteError{Errno: syscall.ENOENT, Msg: "no " + m.Path}
		}
		return nil, nil
	})
	cli, srv, err := pair(t, plain(""), plain(""), echo, echo)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 64; i++ {
		for _, c := range []*Conn{cli, srv} {
			wg.Add(1)
			go func(c *Conn, i int) {
				defer wg.Done()
				r, err := c.Call(context.Background(), &ReadBlock{Index: uint64(i), Version: uint64(i)})
				if err != nil {
					t.Error(err)
					return
				}
				br := r.(*BlockReply)
				if br.Version != uint64(i) || len(br.Data) != i*100 {
					t.Errorf("reply %d: version %d len %d", i, br.Version, len(br.Data))
				}
			}(c, i)
		}
	}
	wg.Wait()
	_, err = cli.Call(context.Background(), &Lookup{Path: "x"})
	if !errors.Is(err, syscall.ENOENT) {
		t.Errorf("error reply: %v", err)
	}
	if _, err := cli.Call(context.Background(), &Ping{}); err != nil {
		t.Errorf("ping: %v", err)
	}
}

func TestGarbageClosesOnlyThatConnection(t *testing.T) {
	block := make(chan struct{})
	h := HandlerFunc(func(ctx context.Context, c *Conn, m Msg) (Msg, error) {
		if _, ok := m.(*Ping); ok {
			<-block
		}
		return nil, nil
	})
	cli, srv, err := pair(t, plain(""), plain(""), h, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := cli.Call(ctx, &Ping{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("blocked call: %v", err)
	}
	close(block)
	cli.nc.Write(bytes.Repeat([]byte{0xff}, 64))
	select {
	case <-srv.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("server kept a connection that sent garbage")
	}
	if !errors.Is(srv.Err(), ErrBadMagic) {
		t.Errorf("server conn error: %v", srv.Err())
	}
	<-cli.Done()
	if _, err := cli.Call(context.Background(), &Ping{}); err == nil {
		t.Error("call on closed conn succeeded")
	}
}
