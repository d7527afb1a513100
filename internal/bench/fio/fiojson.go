package fio

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// FioResult is what one fio run measured, summed over its jobs (fio's
// --group_reporting gives one entry; several are added up).
type FioResult struct {
	ReadBytes, WriteBytes int64   // bytes moved
	ReadBW, WriteBW       float64 // bytes per second
	ReadIOPS, WriteIOPS   float64
	ReadLatNs, WriteLatNs float64 // mean total latency of one I/O
	Errors                int     // jobs that reported an error
}

type fioSide struct {
	IOBytes int64   `json:"io_bytes"`
	BWBytes float64 `json:"bw_bytes"`
	IOPS    float64 `json:"iops"`
	LatNs   struct {
		Mean float64 `json:"mean"`
	} `json:"lat_ns"`
}

type fioJob struct {
	Name  string  `json:"jobname"`
	Error int     `json:"error"`
	Read  fioSide `json:"read"`
	Write fioSide `json:"write"`
}

type fioOutput struct {
	Version string   `json:"fio version"`
	Jobs    []fioJob `json:"jobs"`
}

// ParseFio reads fio's --output-format=json output. fio may print warnings
// before the JSON document ("fio: ..."): everything before its first '{'
// at the start of a line is skipped.
func ParseFio(out []byte) (FioResult, error) {
	start := bytes.Index(out, []byte("\n{"))
	switch {
	case bytes.HasPrefix(out, []byte("{")):
		start = 0
	case start >= 0:
		start++
	default:
		return FioResult{}, errors.New("fio output holds no JSON document")
	}
	var doc fioOutput
	dec := json.NewDecoder(bytes.NewReader(out[start:]))
	if err := dec.Decode(&doc); err != nil {
		return FioResult{}, fmt.Errorf("fio JSON output: %w", err)
	}
	if len(doc.Jobs) == 0 {
		return FioResult{}, errors.New("fio JSON output lists no jobs")
	}
	var r FioResult
	var rLat, wLat float64
	for _, j := range doc.Jobs {
		if j.Error != 0 {
			r.Errors++
		}
		r.ReadBytes += j.Read.IOBytes
		r.WriteBytes += j.Write.IOBytes
		r.ReadBW += j.Read.BWBytes
		r.WriteBW += j.Write.BWBytes
		r.ReadIOPS += j.Read.IOPS
		r.WriteIOPS += j.Write.IOPS
		rLat += j.Read.LatNs.Mean
		wLat += j.Write.LatNs.Mean
	}
	r.ReadLatNs = rLat / float64(len(doc.Jobs))
	r.WriteLatNs = wLat / float64(len(doc.Jobs))
	if r.Errors > 0 {
		return r, fmt.Errorf("fio: %d of %d jobs failed", r.Errors, len(doc.Jobs))
	}
	return r, nil
}
