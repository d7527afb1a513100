package disk

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func TestMetaStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meta")
	m, err := OpenMeta(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenMeta(path); err == nil {
		t.Fatal("a second OpenMeta of a store in use succeeded")
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(m.SetAttr(7, []byte("attr of 7")))
	must(m.SetAttr(8, []byte("attr of 8")))
	must(m.SetAttr(7, []byte("new attr of 7")))
	must(m.DeleteAttr(8))
	must(m.SetLookup(1, "a", 7))
	must(m.SetLookup(1, "b", 8))
	must(m.DeleteLookup(1, "b"))
	if err := m.SetAttr(1, make([]byte, MaxAttrLen+1)); err == nil {
		t.Fatal("an oversized attribute was stored")
	}
	must(m.Close())
	// A torn tail (a crash mid-append) is cut off; the rest survives.
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.Write(encodeMeta(metaSetAttr, u64(9), []byte("torn"))[:12])
	f.Close()
	m, err = OpenMeta(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if a, ok := m.Attr(7); !ok || string(a) != "new attr of 7" {
		t.Fatalf("Attr(7) = %q, %v", a, ok)
	}
	if _, ok := m.Attr(8); ok {
		t.Fatal("a deleted attribute came back")
	}
	if c, ok := m.Lookup(1, "a"); !ok || c != 7 {
		t.Fatalf("Lookup(1, a) = %d, %v", c, ok)
	}
	if _, ok := m.Lookup(1, "b"); ok {
		t.Fatal("a deleted lookup came back")
	}
	must(m.SetAttr(10, []byte("after the torn tail")))
	if a, l := m.Len(); a != 2 || l != 1 {
		t.Fatalf("Len = %d, %d", a, l)
	}
}

func TestMetaCompaction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meta")
	m, err := OpenMeta(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5000 {
		if err := m.SetAttr(uint64(i%10), []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
		if err := m.SetLookup(1, fmt.Sprint(i%10), uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	m.Close()
	if st, _ := os.Stat(path); st.Size() > 100_000 {
		t.Fatalf("log of 20 live entries is %d bytes: never compacted", st.Size())
	}
	m, err = OpenMeta(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if a, _ := m.Attr(9); !bytes.Equal(a, []byte("4999")) {
		t.Fatalf("Attr(9) = %q after compaction", a)
	}
	if c, _ := m.Lookup(1, "9"); c != 4999 {
		t.Fatalf("Lookup(1, 9) = %d after compaction", c)
	}
}
