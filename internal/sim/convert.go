package sim

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"strconv"
)

// ObjectID is the object id a converter writes for an access to an
// object-format trace (oracleGeneral, csv, txt, lirs): an object access
// (Size > 0) keeps its id (File); a block of file 0 (LIRS, txt) is its block
// number; block b of file f is f<<24 | b when f < 2^40 and b < 2^24, else
// an FNV-1a 64 hash of both.
func ObjectID(a Access) uint64 {
	switch {
	case a.Size > 0:
		return a.File
	case a.File == 0:
		return a.Block
	case a.File < 1<<40 && a.Block < 1<<24:
		return a.File<<24 | a.Block
	}
	h := fnv.New64a()
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:], a.File)
	binary.LittleEndian.PutUint64(b[8:], a.Block)
	h.Write(b[:])
	return h.Sum64()
}

// dataAccess reports whether a reads or writes data (what object formats
// can carry).
func dataAccess(a Access) bool { return a.Op == OpRead || a.Op == OpWrite }

// Convert writes every access of w to out in format to. Object formats
// (oracleGeneral, lirs, txt) carry only data accesses (opens, closes and
// deletes are dropped; lirs and txt carry reads and writes as reads);
// sizes absent from the source are blockSize. oracleGeneral needs the next
// access of every record: Convert reads w twice and keeps 4 bytes per
// record plus a map of the objects.
func Convert(out io.Writer, w Workload, to Format, blockSize int64) error {
	switch to {
	case FormatCoopfs:
		return WriteTrace(out, w)
	case FormatLIRS, FormatTxt:
		return writeLines(out, w, func(bw *bufio.Writer, a Access) {
			if dataAccess(a) {
				bw.Write(strconv.AppendUint(nil, ObjectID(a), 10))
				bw.WriteByte('\n')
			}
		})
	case FormatCSV:
		bw := bufio.NewWriterSize(out, 256<<10)
		bw.WriteString("time,obj_id,obj_size,op,client\n")
		buf := make([]byte, 0, 128)
		err := ForEach(w, func(a Access) {
			buf = strconv.AppendFloat(buf[:0], a.Time.Seconds(), 'f', -1, 64)
			buf = append(buf, ',')
			buf = strconv.AppendUint(buf, ObjectID(a), 10)
			buf = append(buf, ',')
			buf = strconv.AppendUint(buf, uint64(sizeOf(a, blockSize)), 10)
			buf = append(buf, ',')
			buf = append(buf, a.Op.String()...)
			buf = append(buf, ',')
			buf = strconv.AppendInt(buf, int64(a.Client), 10)
			buf = append(buf, '\n')
			bw.Write(buf)
		})
		if err != nil {
			return err
		}
		return bw.Flush()
	case FormatOracle, FormatOracleNS:
		return writeOracle(out, w, blockSize, to == FormatOracleNS)
	}
	return fmt.Errorf("cannot convert to format %q: want coopfs, lirs, txt, oracleGeneral, oracleGeneralOpNS or csv", to)
}

func sizeOf(a Access, blockSize int64) uint32 {
	if a.Size > 0 {
		return a.Size
	}
	return uint32(min(max(blockSize, 0), math.MaxUint32))
}

func writeLines(out io.Writer, w Workload, f func(*bufio.Writer, Access)) error {
	bw := bufio.NewWriterSize(out, 256<<10)
	if err := ForEach(w, func(a Access) { f(bw, a) }); err != nil {
		return err
	}
	return bw.Flush()
}

// writeOracle writes oracleGeneral records, or with ns oracleGeneralOpNS
// records (which also carry deletes, and the client as the namespace):
// next access is the 1-based position of the object's next record
// (libCacheSim's convention), -1 if none.
func writeOracle(out io.Writer, w Workload, blockSize int64, ns bool) error {
	size := OracleRecordSize
	if ns {
		size = OracleNSRecordSize
	}
	last := make(map[uint64]uint32)
	var next []uint32 // 1-based position of the next access, 0 if none
	var bad error
	err := ForEach(w, func(a Access) {
		if ns && a.Client > math.MaxUint16 && bad == nil {
			bad = fmt.Errorf("client %d: oracleGeneralOpNS namespaces are 16 bits", a.Client)
		}
		objectRecords(a, ns, func(id uint64, _ Access) {
			i := uint32(len(next))
			next = append(next, 0)
			if j, ok := last[id]; ok {
				next[j] = i + 1
			}
			last[id] = i
		})
	})
	if err == nil {
		err = bad
	}
	if err != nil {
		return err
	}
	if len(next) >= math.MaxUint32-1 {
		return fmt.Errorf("trace too long for the converter: %d records", len(next))
	}
	clear(last)
	bw := bufio.NewWriterSize(out, 256<<10)
	var rec [OracleNSRecordSize]byte
	i := 0
	err = ForEach(w, func(a Access) {
		objectRecords(a, ns, func(id uint64, a Access) {
			if i >= len(next) {
				return
			}
			binary.LittleEndian.PutUint32(rec[0:], uint32(min(int64(a.Time.Seconds()), math.MaxUint32)))
			binary.LittleEndian.PutUint64(rec[4:], id)
			binary.LittleEndian.PutUint32(rec[12:], sizeOf(a, blockSize))
			nx := int64(-1)
			if next[i] > 0 {
				nx = int64(next[i])
			}
			at := 16
			if ns {
				rec[16] = lcsOpCode(a.Op)
				binary.LittleEndian.PutUint16(rec[17:], uint16(a.Client))
				at = 19
			}
			binary.LittleEndian.PutUint64(rec[at:], uint64(nx))
			bw.Write(rec[:size])
			i++
		})
	})
	if err != nil {
		return err
	}
	return bw.Flush()
}

// objectRecords calls f with the object id of each record access a
// becomes in an oracle format: one for a read or a write; with deletes
// (oracleGeneralOpNS) one for the delete of an object, or one per block
// for the delete of a file of blocks; none otherwise.
func objectRecords(a Access, deletes bool, f func(id uint64, a Access)) {
	switch {
	case dataAccess(a):
		f(ObjectID(a), a)
	case a.Op != OpDelete || !deletes:
	case a.Size > 0:
		f(ObjectID(a), a)
	default:
		for b := range a.Block {
			f(ObjectID(Access{File: a.File, Block: b}), a)
		}
	}
}
