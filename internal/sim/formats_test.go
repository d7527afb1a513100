package sim

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

func oracleRec(t uint32, id uint64, size uint32, next int64) []byte {
	var b [OracleRecordSize]byte
	binary.LittleEndian.PutUint32(b[0:], t)
	binary.LittleEndian.PutUint64(b[4:], id)
	binary.LittleEndian.PutUint32(b[12:], size)
	binary.LittleEndian.PutUint64(b[16:], uint64(next))
	return b[:]
}

func TestOracleFormat(t *testing.T) {
	var in []byte
	in = append(in, oracleRec(5, 42, 10000, 3)...)
	in = append(in, oracleRec(6, 7, 100, -1)...)
	in = append(in, oracleRec(6, 42, 10000, math.MaxInt64)...) // libCacheSim's other "none"
	src, err := NewReader(bytes.NewReader(in), FormatOracle)
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAll(t, src)
	want := []Access{{Time: 5 * time.Second, File: 42, Size: 10000, Next: 3}, {Time: 6 * time.Second, File: 7, Size: 100, Next: -1},
		{Time: 6 * time.Second, File: 42, Size: 10000, Next: -1}}
	if err != nil || len(got) != len(want) {
		t.Fatalf("got %v, %v", got, err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("record %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	// Sizes as blocks: 10000 bytes are 3 blocks of 4096, 100 bytes one.
	src, _ = NewReaderOptions(bytes.NewReader(in), ReadOptions{Format: FormatOracle, Sizes: SizesBlocks, BlockSize: 4096})
	got, err = readAll(t, src)
	if err != nil || len(got) != 7 || got[2].Block != 2 || got[3].File != 7 || got[3].Block != 0 || got[6].Block != 2 || got[0].Size != 0 {
		t.Errorf("blocks: %v, %v", got, err)
	}
	for i, a := range got { // the records' positions are not the blocks'
		if a.Next != 0 {
			t.Errorf("blocks: access %d has next %d, want 0", i, a.Next)
		}
	}
	src, _ = NewReaderOptions(bytes.NewReader(in), ReadOptions{Format: FormatOracle, Sizes: SizesIgnore})
	if got, err = readAll(t, src); err != nil || len(got) != 3 || got[0].Size != 0 || got[0].Next != 3 {
		t.Errorf("ignore: %v, %v", got, err)
	}
	// A truncated record and a bad next access are one clear error each.
	for name, bad := range map[string][]byte{"truncated": in[:30], "next": oracleRec(1, 2, 3, -7)} {
		src, _ := NewReader(bytes.NewReader(bad), FormatOracle)
		if _, err := readAll(t, src); err == nil || !strings.Contains(err.Error(), "oracleGeneral") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

func oracleNSRec(t uint32, id uint64, size uint32, op byte, ns uint16, next int64) []byte {
	var b [OracleNSRecordSize]byte
	binary.LittleEndian.PutUint32(b[0:], t)
	binary.LittleEndian.PutUint64(b[4:], id)
	binary.LittleEndian.PutUint32(b[12:], size)
	b[16] = op
	binary.LittleEndian.PutUint16(b[17:], ns)
	binary.LittleEndian.PutUint64(b[19:], uint64(next))
	return b[:]
}

// TestOracleNSFormat pins the oracleGeneralOpNS layout: operations as
// libCacheSim numbers them, the namespace as the client, a delete of a
// sized object naming its one block when sizes are ignored, and one clear
// error for a bad operation, a bad next access or a truncated record.
func TestOracleNSFormat(t *testing.T) {
	var in []byte
	in = append(in, oracleNSRec(5, 42, 10000, 1, 3, 3)...)  // get by client 3
	in = append(in, oracleNSRec(6, 7, 100, 3, 41, -1)...)   // set by client 41
	in = append(in, oracleNSRec(6, 42, 10000, 9, 0, -1)...) // delete
	src, err := NewReader(bytes.NewReader(in), FormatOracleNS)
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAll(t, src)
	want := []Access{{Time: 5 * time.Second, Client: 3, File: 42, Size: 10000, Next: 3}, {Time: 6 * time.Second, Client: 41, File: 7, Op: OpWrite, Size: 100, Next: -1},
		{Time: 6 * time.Second, File: 42, Op: OpDelete, Size: 10000, Next: -1}}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("got %+v, %v; want %+v", got, err, want)
	}
	src, _ = NewReaderOptions(bytes.NewReader(in), ReadOptions{Format: FormatOracleNS, Sizes: SizesIgnore})
	if got, err = readAll(t, src); err != nil || len(got) != 3 || got[2].Block != 1 || got[2].Size != 0 {
		t.Errorf("ignore: %+v, %v", got, err)
	}
	for name, bad := range map[string][]byte{"truncated": in[:20], "next": oracleNSRec(1, 2, 3, 1, 0, -7), "op": oracleNSRec(1, 2, 3, 77, 0, -1)} {
		src, _ := NewReader(bytes.NewReader(bad), FormatOracleNS)
		if _, err := readAll(t, src); err == nil || !strings.Contains(err.Error(), "oracleGeneralOpNS") || !strings.Contains(err.Error(), "record 1") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

func TestCSVSpec(t *testing.T) {
	c, err := ParseCSVSpec("time-col=1, obj-id-col=2, obj-size-col=3, delimiter=tab, has-header=true, obj-id-is-num=false")
	want := CSVSpec{TimeCol: 1, IDCol: 2, SizeCol: 3, Delim: '\t', Header: true, HashIDs: true}
	if err != nil || c != want {
		t.Errorf("got %+v, %v", c, err)
	}
	for _, bad := range []string{"time-col=1", "obj-id-col=0", "obj-id-col=2,op-col=2", "nope=1", "obj-id-col", "obj-id-col=1,delimiter=ab", "obj-id-col=1,time-scale=-1"} {
		if _, err := ParseCSVSpec(bad); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: err = %v", bad, err)
		}
	}
}

func TestCSVFormat(t *testing.T) {
	in := "ts,key,size,op,client\n100,5,4096,get,0\n\n# note\n101,\"6\",10,set,3\n102,5,4096,delete,1\n"
	spec, _ := ParseCSVSpec("time-col=1,obj-id-col=2,obj-size-col=3,op-col=4,client-col=5,has-header=true,time-scale=0.001")
	src, err := NewReaderOptions(strings.NewReader(in), ReadOptions{Format: FormatCSV, CSV: spec})
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAll(t, src)
	want := []Access{{Time: 100 * time.Millisecond, File: 5, Size: 4096}, {Time: 101 * time.Millisecond, Client: 3, File: 6, Size: 10, Op: OpWrite},
		{Time: 102 * time.Millisecond, Client: 1, File: 5, Size: 4096, Op: OpDelete}}
	if err != nil || len(got) != 3 {
		t.Fatalf("got %v, %v", got, err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	for _, bad := range []string{"1,abc,3,get,0", "1,2", "x,2,3,get,0", "1,2,3,jump,0", "1,2,99999999999,get,0"} {
		src, _ := NewReaderOptions(strings.NewReader("h\n"+bad+"\n"), ReadOptions{Format: FormatCSV, CSV: spec})
		if _, err := readAll(t, src); err == nil || !strings.Contains(err.Error(), "line 2") {
			t.Errorf("%q: err = %v", bad, err)
		}
	}
	// Hashed string ids: the same key is the same object.
	hs, _ := ParseCSVSpec("obj-id-col=1,obj-id-is-num=false")
	src, _ = NewReaderOptions(strings.NewReader("alpha\nbeta\nalpha\n"), ReadOptions{Format: FormatCSV, CSV: hs})
	got, err = readAll(t, src)
	if err != nil || len(got) != 3 || got[0].File != got[2].File || got[0].File == got[1].File || got[2].Time != 2*LIRSInterval {
		t.Errorf("hashed: %v, %v", got, err)
	}
}

func TestZstdInput(t *testing.T) {
	var buf bytes.Buffer
	zw, _ := zstd.NewWriter(&buf)
	zw.Write([]byte("0.5 3 7 2 read\n1 0 7 4 open\n"))
	zw.Close()
	src, err := NewReader(&buf, FormatCoopfs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAll(t, src)
	if err != nil || len(got) != 2 || got[1].Op != OpOpen {
		t.Fatalf("got %v, %v", got, err)
	}
	if err := CloseSource(src); err != nil {
		t.Error(err)
	}
}

// convertBytes converts in-memory accesses to format f and reads them back
// with the given read options.
func convertBytes(t *testing.T, acc []Access, to Format, bs int64) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := Convert(&out, &Slice{Label: "x", Accesses: acc}, to, bs); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func TestConvertRoundTrip(t *testing.T) {
	w, _ := Generate(GenConfig{Pattern: GenZipf, Clients: 3, Accesses: 3000, Files: 50, Seed: 4})
	acc, _ := Collect(w)
	// coopfs → oracleGeneral: one record per read or write, ids by
	// ObjectID, next access the 1-based position of the next record.
	og := convertBytes(t, acc, FormatOracle, 4096)
	var data []Access
	for _, a := range acc {
		if dataAccess(a) {
			data = append(data, a)
		}
	}
	if len(og) != len(data)*OracleRecordSize {
		t.Fatalf("%d bytes for %d data accesses", len(og), len(data))
	}
	for i, a := range data {
		r := og[i*OracleRecordSize:]
		if id := binary.LittleEndian.Uint64(r[4:]); id != ObjectID(a) {
			t.Fatalf("record %d: id %d, want %d", i, id, ObjectID(a))
		}
		next := int64(binary.LittleEndian.Uint64(r[16:]))
		want := int64(-1)
		for j := i + 1; j < len(data); j++ {
			if ObjectID(data[j]) == ObjectID(a) {
				want = int64(j + 1)
				break
			}
		}
		if next != want {
			t.Fatalf("record %d: next %d, want %d", i, next, want)
		}
	}
	// oracleGeneral → csv → oracleGeneral and → txt → oracleGeneral are
	// the identity (txt keeps ids; sizes and times are lost there).
	back, _ := readAll(t, mustReader(t, og, ReadOptions{Format: FormatOracle}))
	csv := convertBytes(t, back, FormatCSV, 0)
	fromCSV, err := readAll(t, mustReader(t, csv, ReadOptions{Format: FormatCSV}))
	if err != nil {
		t.Fatal(err)
	}
	if og2 := convertBytes(t, fromCSV, FormatOracle, 0); !bytes.Equal(og, og2) {
		t.Error("oracleGeneral → csv → oracleGeneral changed the trace")
	}
	txt := convertBytes(t, back, FormatTxt, 0)
	fromTxt, _ := readAll(t, mustReader(t, txt, ReadOptions{Format: FormatTxt}))
	if len(fromTxt) != len(back) {
		t.Fatalf("txt: %d accesses, want %d", len(fromTxt), len(back))
	}
	for i := range back {
		if fromTxt[i].Block != back[i].File {
			t.Fatalf("txt access %d: id %d, want %d", i, fromTxt[i].Block, back[i].File)
		}
	}
	// coopfs → oracleGeneralOpNS keeps the clients, the writes and the
	// deletes (a file's delete becomes a delete of each of its blocks),
	// with next accesses over all records (libCacheSim's: the next
	// record's position counted from 1, -1 if none).
	ns := convertBytes(t, acc, FormatOracleNS, 4096)
	var recs []Access
	last := map[uint64]int{}
	for _, a := range acc {
		objectRecords(a, true, func(id uint64, a Access) {
			a.File, a.Block, a.Size, a.Next = id, 0, 4096, -1
			if j, ok := last[id]; ok {
				recs[j].Next = int64(len(recs) + 1)
			}
			last[id] = len(recs)
			recs = append(recs, a)
		})
	}
	fromNS, err := readAll(t, mustReader(t, ns, ReadOptions{Format: FormatOracleNS}))
	if err != nil || len(fromNS) != len(recs) || len(ns) != len(recs)*OracleNSRecordSize {
		t.Fatalf("oracleGeneralOpNS: %d accesses in %d bytes for %d records, %v", len(fromNS), len(ns), len(recs), err)
	}
	for i, a := range recs {
		a.Time = a.Time.Truncate(time.Second)
		if fromNS[i] != a {
			t.Fatalf("oracleGeneralOpNS access %d: %+v, want %+v", i, fromNS[i], a)
		}
	}
	if og2 := convertBytes(t, fromNS, FormatOracleNS, 0); !bytes.Equal(ns, og2) {
		t.Error("oracleGeneralOpNS → oracleGeneralOpNS changed the trace")
	}
	// coopfs → coopfs (through gzip) is the identity.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(convertBytes(t, acc, FormatCoopfs, 0))
	zw.Close()
	again, err := readAll(t, mustReader(t, gz.Bytes(), ReadOptions{Format: FormatCoopfs}))
	if err != nil || len(again) != len(acc) {
		t.Fatalf("coopfs: %d accesses, %v", len(again), err)
	}
	for i := range acc {
		if again[i] != acc[i] {
			t.Fatalf("coopfs access %d: %+v, want %+v", i, again[i], acc[i])
		}
	}
}

func mustReader(t *testing.T, b []byte, o ReadOptions) Source {
	t.Helper()
	src, err := NewReaderOptions(bytes.NewReader(b), o)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func FuzzOracleReader(f *testing.F) {
	f.Add(append(oracleRec(1, 2, 3, 4), oracleRec(5, 2, 0, -1)...))
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd, 0})
	f.Add(oracleRec(1, 2, 3, 4)[:20])
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRead(t, data, []ReadOptions{{Format: FormatOracle}, {Format: FormatOracle, Sizes: SizesBlocks, BlockSize: 1 << 20}},
			func(a Access) bool { return a.Op != OpRead || a.Client != 0 })
	})
}

func FuzzOracleNSReader(f *testing.F) {
	f.Add(append(oracleNSRec(1, 2, 3, 1, 4, 2), oracleNSRec(5, 2, 0, 9, 0, -1)...))
	f.Add(oracleNSRec(1, 2, 3, 200, 0, -1))
	f.Add(oracleNSRec(1, 2, 3, 1, 0, 4)[:20])
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRead(t, data, []ReadOptions{{Format: FormatOracleNS}, {Format: FormatOracleNS, Sizes: SizesBlocks, BlockSize: 1 << 20},
			{Format: FormatOracleNS, Sizes: SizesIgnore}},
			func(a Access) bool { return a.Op > OpDelete || a.Op == OpOpen || a.Op == OpClose || a.Client > 65535 })
	})
}

// fuzzRead reads data with each of opts and fails on an access that bad
// rejects, a negative time or client, or a size left where sizes are
// expanded or ignored; and read in batches (the fast paths), data must
// give the same accesses and the same error.
func fuzzRead(t *testing.T, data []byte, opts []ReadOptions, bad func(Access) bool) {
	for _, o := range opts {
		src, err := NewReaderOptions(bytes.NewReader(data), o)
		if err != nil {
			continue
		}
		var one []Access
		var oneErr error
		for range 10000 {
			a, err := src.Next()
			if err != nil {
				oneErr = err
				break
			}
			if bad(a) || a.Client < 0 || a.Time < 0 || (o.Sizes != SizesKeep && a.Size != 0) {
				t.Fatalf("bad access %+v", a)
			}
			one = append(one, a)
		}
		if oneErr == nil {
			continue
		}
		src, _ = NewReaderOptions(bytes.NewReader(data), o)
		var batched []Access
		var batchErr error
		buf := make([]Access, 7)
		for batchErr == nil {
			var n int
			n, batchErr = FillBatch(src, buf)
			batched = append(batched, buf[:n]...)
		}
		if !slices.Equal(one, batched) || oneErr.Error() != batchErr.Error() {
			t.Fatalf("one by one %d accesses, %v; in batches %d, %v", len(one), oneErr, len(batched), batchErr)
		}
	}
}

func FuzzCSVReader(f *testing.F) {
	f.Add("time-col=1,obj-id-col=2,obj-size-col=3,op-col=4,client-col=5,has-header=true", []byte("t,k\n1,2,3,get,4\n"))
	f.Add("obj-id-col=1,obj-id-is-num=false,delimiter=tab", []byte("abc\t1\n\"x\"\n"))
	f.Add("obj-id-col=2,time-col=1,time-scale=1e-6", []byte("1e9,1\n"))
	f.Fuzz(func(t *testing.T, spec string, data []byte) {
		c, err := ParseCSVSpec(spec)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error %q", err)
			}
			return
		}
		src, err := NewReaderOptions(bytes.NewReader(data), ReadOptions{Format: FormatCSV, CSV: c, Sizes: SizesBlocks, BlockSize: 4096})
		if err != nil {
			return
		}
		for range 10000 {
			a, err := src.Next()
			if err != nil {
				break
			}
			if a.Client < 0 || a.Op > OpDelete || a.Time < 0 {
				t.Fatalf("bad access %+v", a)
			}
		}
		// The batch fast path reads exactly what the line parser reads.
		read := func(batch bool) ([]Access, string) {
			src, _ := NewReaderOptions(bytes.NewReader(data), ReadOptions{Format: FormatCSV, CSV: c})
			if !batch {
				src = nextOnly{src}
			}
			var out []Access
			buf := make([]Access, 64)
			for len(out) < 10000 {
				n, err := FillBatch(src, buf)
				out = append(out, buf[:n]...)
				if err != nil {
					return out, err.Error()
				}
			}
			return out, ""
		}
		want, werr := read(false)
		got, gerr := read(true)
		if werr != gerr || !slices.Equal(got, want) {
			t.Fatalf("batch read %d accesses (%s), line by line %d (%s)", len(got), gerr, len(want), werr)
		}
	})
}

// BenchmarkReaders measures how fast each reader parses (MB/s of input,
// from memory, in batches as Run reads): coopfs text, txt and oracleGeneral forms of one trace.
func BenchmarkReaders(b *testing.B) {
	w, _ := Generate(GenConfig{Pattern: GenZipf, Clients: 42, Accesses: 500000, Files: 20000, Seed: 1})
	acc, _ := Collect(w)
	for _, f := range []Format{FormatCoopfs, FormatTxt, FormatCSV, FormatOracle} {
		var buf bytes.Buffer
		if err := Convert(&buf, &Slice{Accesses: acc}, f, 4096); err != nil {
			b.Fatal(err)
		}
		data := buf.Bytes()
		b.Run(string(f), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			n := 0
			batch := make([]Access, prefetchBatch)
			cpu0 := cpuTime()
			for b.Loop() {
				src, _ := NewReader(bytes.NewReader(data), f)
				for {
					k, err := FillBatch(src, batch) // as Run reads
					n += k
					if err != nil {
						break
					}
				}
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "accesses/s")
			// The machine may be shared: rates per CPU-second too.
			if cpu := (cpuTime() - cpu0).Seconds(); cpu > 0 {
				b.ReportMetric(float64(len(data))*float64(b.N)/1e6/cpu, "MB/CPU-s")
			}
		})
	}
}

// cpuTime is the CPU time (user + system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// nextOnly hides a source's NextBatch: one access per call.
type nextOnly struct{ Source }

// TestBatchFastPaths checks that the text readers' batch fast paths give
// exactly what their line-by-line parsers give, on inputs that mix the
// usual lines with every kind the fast paths leave to the general parser
// (comments, '*' lines, blanks, \r\n, long numbers), over several read
// buffers' worth so that lines straddle buffer ends.
func TestBatchFastPaths(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	var coopfs, txt bytes.Buffer
	ops := []string{"read", "write", "open", "close", "delete", "r", "w"}
	for i := range 120000 {
		switch rng.IntN(40) {
		case 0:
			coopfs.WriteString("# a comment\n")
			txt.WriteString("*\n")
		case 1:
			fmt.Fprintf(&coopfs, "  %d.5 %d %d %d read  \n", i, rng.IntN(42), rng.Uint64N(1000), rng.Uint64N(100))
			fmt.Fprintf(&txt, "  %d\n", rng.Uint64N(1000))
		case 2:
			fmt.Fprintf(&coopfs, "%d\t%d\t%d\t%d\tw\r\n", i, rng.IntN(42), rng.Uint64N(1000), rng.Uint64N(100))
			fmt.Fprintf(&txt, "%d\r\n", rng.Uint64N(1000))
		case 3:
			coopfs.WriteString("\n")
			fmt.Fprintf(&txt, "%d\n", uint64(1)<<62+rng.Uint64N(1000)) // 19 digits
		default:
			fmt.Fprintf(&coopfs, "%d.%03d %d %d %d %s\n", i/1000, i%1000, rng.IntN(42), rng.Uint64N(1<<40), rng.Uint64N(100), ops[rng.IntN(len(ops))])
			fmt.Fprintf(&txt, "%d\n", rng.Uint64N(1<<50))
		}
	}
	var csv bytes.Buffer
	csv.WriteString("time,obj_id,obj_size,op,client\n")
	for i := range 60000 {
		switch rng.IntN(30) {
		case 0:
			csv.WriteString("# comment\n\n")
		case 1:
			fmt.Fprintf(&csv, " %d , \"%d\" ,%d, GET ,%d\r\n", i, rng.Uint64N(1000), rng.IntN(9000), rng.IntN(42))
		case 2:
			fmt.Fprintf(&csv, "%d,%d,%d,open,%d,extra,columns\n", i, rng.Uint64(), rng.IntN(9000), rng.IntN(42))
		case 3:
			fmt.Fprintf(&csv, "%de-3,%d,%d,close,%d\n", i, rng.Uint64N(1000), rng.IntN(9000), rng.IntN(42))
		case 4:
			fmt.Fprintf(&csv, "%d,%d,%d,Write,%d\r\n", i, rng.Uint64N(1000), rng.IntN(9000), rng.IntN(42))
		default:
			fmt.Fprintf(&csv, "%d.%03d,%d,%d,%s,%d\n", i/1000, i%1000, rng.Uint64N(1<<40), rng.IntN(1<<20), []string{"read", "set", "delete", "get"}[rng.IntN(4)], rng.IntN(42))
		}
	}
	csv.WriteString("1,2,3,bogus,4\n")
	var oracle bytes.Buffer // many buffers of records, then a bad one, then a truncated one
	for i := range 30000 {
		oracle.Write(oracleRec(uint32(i), rng.Uint64(), uint32(rng.IntN(1<<20)), int64(rng.IntN(100000))-1))
	}
	oracle.Write(oracleRec(1, 2, 3, -5))
	oracle.Write(oracleRec(1, 2, 3, 4)[:10])
	// Other layouts: columns reordered, hashed ids, a delimiter that
	// could be read as part of a number.
	var tsv, dot bytes.Buffer
	for i := range 40000 {
		fmt.Fprintf(&tsv, "%d\t%d\tk%d\t%d.%d\n", rng.IntN(42), rng.IntN(9000), rng.Uint64N(5000), i, rng.IntN(100))
		fmt.Fprintf(&dot, "%d.%d.%d\n", i, rng.Uint64N(5000), rng.IntN(42))
	}
	tsvSpec, _ := ParseCSVSpec("client-col=1,obj-size-col=2,obj-id-col=3,obj-id-is-num=false,time-col=4,delimiter=tab,time-scale=1e-3")
	dotSpec, _ := ParseCSVSpec("time-col=1,obj-id-col=2,client-col=3,delimiter=.")
	for _, tc := range []struct {
		f    Format
		data []byte
		spec CSVSpec
	}{{FormatCoopfs, coopfs.Bytes(), CSVSpec{}}, {FormatTxt, txt.Bytes(), CSVSpec{}}, {FormatLIRS, append(txt.Bytes(), "12x\n"...), CSVSpec{}},
		{FormatOracle, oracle.Bytes(), CSVSpec{}}, {FormatCSV, csv.Bytes(), CSVSpec{}}, {FormatCSV, tsv.Bytes(), tsvSpec}, {FormatCSV, dot.Bytes(), dotSpec}} {
		read := func(batch bool) ([]Access, error) {
			src, err := NewReaderOptions(bytes.NewReader(tc.data), ReadOptions{Format: tc.f, CSV: tc.spec})
			if err != nil {
				t.Fatal(err)
			}
			if !batch {
				src = nextOnly{src}
			}
			var out []Access
			buf := make([]Access, 1000)
			for {
				n, err := FillBatch(src, buf)
				out = append(out, buf[:n]...)
				if err == io.EOF {
					return out, nil
				}
				if err != nil {
					return out, err
				}
			}
		}
		want, werr := read(false)
		got, gerr := read(true)
		if fmt.Sprint(werr) != fmt.Sprint(gerr) || !slices.Equal(got, want) {
			t.Fatalf("%s: batch read %d accesses (err %v), line by line %d (err %v)", tc.f, len(got), gerr, len(want), werr)
		}
		if len(want) < 30000 {
			t.Fatalf("%s: only %d accesses", tc.f, len(want))
		}
	}
}

// TestBlockExpanderBatches checks that expanding objects into blocks, which
// reads its source in batches, gives the blocks of each object in order and
// the source's error after the last one, whether read in batches or one by
// one.
func TestBlockExpanderBatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	var in bytes.Buffer
	for i := range 5000 {
		fmt.Fprintf(&in, "%d,%d,%d,%s,%d\n", i, rng.Uint64N(100), rng.IntN(40000), []string{"read", "set", "delete", "open"}[rng.IntN(4)], rng.IntN(4))
	}
	in.WriteString("1,2,3,bogus,4\n")
	const bs = 8192
	raw, err := NewReaderOptions(bytes.NewReader(in.Bytes()), ReadOptions{Format: FormatCSV, CSV: CSVSpec{TimeCol: 1, IDCol: 2, SizeCol: 3, OpCol: 4, ClientCol: 5, Delim: ','}})
	if err != nil {
		t.Fatal(err)
	}
	var want []Access
	var werr error
	for {
		a, err := raw.Next()
		if err != nil {
			werr = err
			break
		}
		n := max(1, (uint64(a.Size)+bs-1)/bs)
		a.Size = 0
		if a.Op == OpDelete || a.Op == OpOpen {
			a.Block = n
			want = append(want, a)
			continue
		}
		for b := range n {
			a.Block = b
			want = append(want, a)
		}
	}
	for _, batch := range []bool{true, false} {
		src, err := NewReaderOptions(bytes.NewReader(in.Bytes()), ReadOptions{Format: FormatCSV, Sizes: SizesBlocks, BlockSize: bs,
			CSV: CSVSpec{TimeCol: 1, IDCol: 2, SizeCol: 3, OpCol: 4, ClientCol: 5, Delim: ','}})
		if err != nil {
			t.Fatal(err)
		}
		if !batch {
			src = nextOnly{src}
		}
		var got []Access
		buf := make([]Access, 333)
		for {
			n, err := FillBatch(src, buf)
			got = append(got, buf[:n]...)
			if err != nil {
				if fmt.Sprint(err) != fmt.Sprint(werr) || !slices.Equal(got, want) {
					t.Fatalf("batch %v: %d accesses (err %v), want %d (err %v)", batch, len(got), err, len(want), werr)
				}
				break
			}
		}
	}
}
