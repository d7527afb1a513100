package fio

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/coopfs/coopfs/internal/bench/report"
)

// Units of a row. Latencies are better when lower; the others when higher.
const (
	UnitMBps   = "MB/s"
	UnitIOPS   = "IOPS"
	UnitFilesS = "files/s"
	UnitMicros = "µs"
)

// Target names, in the order of the table.
const (
	TargetExt4   = "ext4"
	TargetPass   = "bindfs"
	TargetCoopWT = "coopfs-wt"
	TargetCoopWB = "coopfs-wb"
)

// Report is one run of the job set on every target.
type Report struct {
	Bench   string            `json:"bench"`
	Command string            `json:"command"`
	Started time.Time         `json:"started"`
	Host    report.Host       `json:"host"`
	Load    []float64         `json:"load_avg,omitempty"` // 1-minute load average at each repetition's start
	Params  map[string]string `json:"params"`
	Targets []string          `json:"targets"`
	Rows    []*Row            `json:"rows"`
	Notes   []string          `json:"notes,omitempty"`
}

// Row is one job: a cell per target.
type Row struct {
	Key   string           `json:"key"`
	Name  string           `json:"name"`
	Unit  string           `json:"unit"`
	Cells map[string]*Cell `json:"cells"`
}

// Cell is one job on one target: a sample per repetition, and the
// ratios to ext4 and to the passthrough (medians of per-repetition
// ratios; 0 when there is nothing to divide by).
type Cell struct {
	Samples  []float64 `json:"samples"`
	Median   float64   `json:"median"`
	VsExt4   float64   `json:"vs_ext4,omitempty"`
	VsPass   float64   `json:"vs_bindfs,omitempty"`
	Error    string    `json:"error,omitempty"`
	ratiosE4 []float64
	ratiosP  []float64
}

// NewReport starts a report over targets.
func NewReport(command string, targets []string) *Report {
	return &Report{Bench: "fio", Command: command, Started: time.Now(), Host: report.ThisHost(),
		Params: map[string]string{}, Targets: slices.Clone(targets)}
}

// Row returns the row with key, adding it (in call order) if new.
func (r *Report) Row(key, name, unit string) *Row {
	for _, row := range r.Rows {
		if row.Key == key {
			return row
		}
	}
	row := &Row{Key: key, Name: name, Unit: unit, Cells: map[string]*Cell{}}
	r.Rows = append(r.Rows, row)
	return row
}

// Get returns the row with key, or nil.
func (r *Report) Get(key string) *Row {
	for _, row := range r.Rows {
		if row.Key == key {
			return row
		}
	}
	return nil
}

// Cell returns the row's cell of target, adding it if new.
func (row *Row) Cell(target string) *Cell {
	c := row.Cells[target]
	if c == nil {
		c = &Cell{}
		row.Cells[target] = c
	}
	return c
}

// Add records one repetition's figure of target.
func (row *Row) Add(target string, v float64) {
	c := row.Cell(target)
	c.Samples = append(c.Samples, v)
}

// Fail records that target's job failed (the cell keeps its samples).
func (row *Row) Fail(target string, err error) {
	c := row.Cell(target)
	if c.Error == "" {
		c.Error = err.Error()
	}
}

// Finish computes medians and ratios.
func (r *Report) Finish() {
	for _, row := range r.Rows {
		for _, c := range row.Cells {
			c.Median = report.Median(c.Samples)
		}
		e4, pass := row.Cells[TargetExt4], row.Cells[TargetPass]
		for _, c := range row.Cells {
			c.VsExt4 = ratio(c, e4)
			c.VsPass = ratio(c, pass)
		}
	}
}

// ratio is the median of c's samples over ref's, repetition by repetition.
func ratio(c, ref *Cell) float64 {
	if ref == nil {
		return 0
	}
	var rs []float64
	for i := range min(len(c.Samples), len(ref.Samples)) {
		if ref.Samples[i] > 0 {
			rs = append(rs, c.Samples[i]/ref.Samples[i])
		}
	}
	return report.Median(rs)
}

// Missing lists the cells without a figure, as "row/target".
func (r *Report) Missing() []string {
	var out []string
	for _, row := range r.Rows {
		for _, t := range r.Targets {
			if c := row.Cells[t]; c == nil || len(c.Samples) == 0 || c.Median <= 0 || math.IsNaN(c.Median) {
				out = append(out, row.Key+"/"+t)
			}
		}
	}
	return out
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText prints the table: a row per job, the median of each target,
// then each FUSE target's ratios to ext4 and to the passthrough.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "coopfs bench fio  (%s; %d CPUs, kernel %s, %s)\n", r.Started.Format("2006-01-02 15:04"), r.Host.CPUs, r.Host.Kernel, r.Host.Go)
	if r.Command != "" {
		fmt.Fprintf(&b, "command: %s\n", r.Command)
	}
	var ps []string
	for _, k := range slices.Sorted(mapKeys(r.Params)) {
		ps = append(ps, k+"="+r.Params[k])
	}
	fmt.Fprintf(&b, "params: %s\n", strings.Join(ps, " "))
	if len(r.Load) > 0 {
		fmt.Fprintf(&b, "load average at each repetition's start: %s\n", nums(r.Load))
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := []string{"job", "unit"}
	head = append(head, r.Targets...)
	for _, t := range r.Targets {
		if t != TargetExt4 && t != TargetPass {
			head = append(head, t+"/ext4", t+"/bindfs")
		}
	}
	fmt.Fprintln(tw, strings.Join(head, "\t")+"\t")
	for _, row := range r.Rows {
		line := []string{row.Key, row.Unit}
		for _, t := range r.Targets {
			line = append(line, cellText(row.Cells[t]))
		}
		for _, t := range r.Targets {
			if t == TargetExt4 || t == TargetPass {
				continue
			}
			c := row.Cells[t]
			if c == nil {
				line = append(line, "-", "-")
				continue
			}
			line = append(line, ratioText(c.VsExt4), ratioText(c.VsPass))
		}
		fmt.Fprintln(tw, strings.Join(line, "\t")+"\t")
	}
	tw.Flush()
	b.WriteString("\nratios are target/reference (medians of per-repetition ratios): above 1 is better, except for µs rows\n")
	for _, row := range r.Rows {
		for _, t := range r.Targets {
			if c := row.Cells[t]; c != nil && c.Error != "" {
				fmt.Fprintf(&b, "error: %s on %s: %s\n", row.Key, t, c.Error)
			}
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func cellText(c *Cell) string {
	if c == nil || len(c.Samples) == 0 {
		return "-"
	}
	return report.Num(c.Median)
}

func ratioText(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

func nums(xs []float64) string {
	var s []string
	for _, x := range xs {
		s = append(s, fmt.Sprintf("%.1f", x))
	}
	return strings.Join(s, " ")
}

func mapKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
