package fio

import (
	"strings"
	"testing"
)

// fioOut is fio 3.33's --output-format=json shape, cut to what is read.
const fioOut = `{
  "fio version" : "fio-3.33",
  "timestamp" : 1765071234,
  "jobs" : [
    {
      "jobname" : "seq-write-4",
      "groupid" : 0,
      "error" : 0,
      "read" : {"io_bytes" : 0, "bw_bytes" : 0, "iops" : 0.000000, "lat_ns" : {"min" : 0, "max" : 0, "mean" : 0.000000, "N" : 0}},
      "write" : {"io_bytes" : 33554432, "bw_bytes" : 1198372571, "iops" : 1142.857143,
                 "lat_ns" : {"min" : 310, "max" : 2900000, "mean" : 875000.5, "N" : 32}},
      "trim" : {"io_bytes" : 0, "bw_bytes" : 0, "iops" : 0.000000}
    }
  ],
  "disk_util" : [{"name" : "vda", "util" : 12.5}]
}
`

func TestParseFio(t *testing.T) {
	r, err := ParseFio([]byte(fioOut))
	if err != nil {
		t.Fatal(err)
	}
	if r.WriteBytes != 32<<20 || r.WriteBW != 1198372571 || r.WriteIOPS != 1142.857143 || r.WriteLatNs != 875000.5 {
		t.Errorf("write side %+v", r)
	}
	if r.ReadBytes != 0 || r.ReadBW != 0 || r.Errors != 0 {
		t.Errorf("read side %+v", r)
	}
}

// fio prints warnings on stdout before the document when it falls back.
func TestParseFioWarningsFirst(t *testing.T) {
	out := "fio: file hash not empty on exit\nnote: both iodepth >= 1 and synchronous I/O engine are selected\n" + fioOut
	r, err := ParseFio([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if r.WriteBW != 1198372571 {
		t.Errorf("%+v", r)
	}
}

// Without --group_reporting fio lists one entry per job: they add up.
func TestParseFioSeveralJobs(t *testing.T) {
	two := strings.Replace(fioOut, "\n    }\n  ],", "\n    },"+jobEntry("r1", 0, 4096, 1e6, 250)+","+jobEntry("r2", 0, 4096, 3e6, 750)+"\n  ],", 1)
	r, err := ParseFio([]byte(two))
	if err != nil {
		t.Fatal(err)
	}
	if r.ReadBytes != 8192 || r.ReadBW != 4e6 || r.ReadIOPS != 1000 {
		t.Errorf("%+v", r)
	}
}

func jobEntry(name string, errno int, bytes int64, bw, iops float64) string {
	return strings.NewReplacer("NAME", name, "ERR", itoa(int64(errno)), "BYTES", itoa(bytes), "BW", ftoa(bw), "IOPS", ftoa(iops)).Replace(
		`{"jobname" : "NAME", "error" : ERR, "read" : {"io_bytes" : BYTES, "bw_bytes" : BW, "iops" : IOPS, "lat_ns" : {"mean" : 1000}}, "write" : {"io_bytes" : 0, "bw_bytes" : 0, "iops" : 0}}`)
}

func TestParseFioErrors(t *testing.T) {
	for name, out := range map[string]string{
		"empty":      "",
		"no json":    "fio: failed to open file\n",
		"truncated":  fioOut[:len(fioOut)/2],
		"no jobs":    `{"fio version" : "fio-3.33", "jobs" : []}`,
		"failed job": `{"jobs" : [` + jobEntry("x", 5, 0, 0, 0) + `]}`,
	} {
		if _, err := ParseFio([]byte(out)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
