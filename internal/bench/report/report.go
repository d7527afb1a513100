package report

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Units of a row.
const (
	UnitMBps   = "MB/s"
	UnitOpsSec = "ops/s"
)

// Report is the outcome of one benchmark run.
type Report struct {
	Bench   string            `json:"bench"`
	Command string            `json:"command"`
	Started time.Time         `json:"started"`
	Host    Host              `json:"host"`
	Params  map[string]string `json:"params"`
	Rows    []*Row            `json:"rows"`
	Notes   []string          `json:"notes,omitempty"`
}

// Host describes the machine.
type Host struct {
	CPUs   int    `json:"cpus"`
	Go     string `json:"go"`
	Kernel string `json:"kernel"`
}

// ThisHost describes the running machine.
func ThisHost() Host {
	k, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return Host{CPUs: runtime.NumCPU(), Go: runtime.Version(), Kernel: strings.TrimSpace(string(k))}
}

// Row is one measured quantity: a sample per repetition.
type Row struct {
	Key     string    `json:"key"`  // short id, e.g. "mem-cache"
	Name    string    `json:"name"` // what was measured, for people
	Unit    string    `json:"unit"`
	Samples []float64 `json:"samples"`
	Median  float64   `json:"median"`
	// Ceiling is the Key of the row this one is compared with; Ratios are
	// Samples[i] / ceiling.Samples[i], Ratio their median.
	Ceiling string    `json:"ceiling,omitempty"`
	Ratios  []float64 `json:"ratios,omitempty"`
	Ratio   float64   `json:"ratio,omitempty"`
	// Target is the ratio to reach (0: none); Met says whether it was.
	Target float64 `json:"target,omitempty"`
	Met    *bool   `json:"met,omitempty"`
	Note   string  `json:"note,omitempty"`
	// Bound says the ceiling row bounds this one: it cannot be faster
	// than its ceiling, so a ratio above 1 means the ceiling measurement
	// is broken (Broken), and the report says so.
	Bound  bool `json:"bound,omitempty"`
	Broken bool `json:"broken,omitempty"`
}

// New starts a report.
func New(bench, command string) *Report {
	return &Report{Bench: bench, Command: command, Started: time.Now(), Host: ThisHost(), Params: map[string]string{}}
}

// Row returns the row with key, adding it (in call order) if new.
func (r *Report) Row(key, name, unit string) *Row {
	for _, row := range r.Rows {
		if row.Key == key {
			return row
		}
	}
	row := &Row{Key: key, Name: name, Unit: unit}
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

// Add appends one repetition's sample.
func (row *Row) Add(v float64) { row.Samples = append(row.Samples, v) }

// Compare makes row's ratios relative to the ceiling row with a target
// (0 for none). Call Finish afterwards.
func (row *Row) Compare(ceiling string, target float64) *Row {
	row.Ceiling, row.Target = ceiling, target
	return row
}

// Bounds is Compare for a ceiling that bounds the row: a ceiling measured
// below the row's figure is reported as a broken measurement.
func (row *Row) Bounds(ceiling string, target float64) *Row {
	row.Bound = true
	return row.Compare(ceiling, target)
}

// Finish computes medians, per-repetition ratios and targets.
func (r *Report) Finish() {
	for _, row := range r.Rows {
		row.Median = Median(row.Samples)
	}
	for _, row := range r.Rows {
		if row.Ceiling == "" {
			continue
		}
		c := r.Get(row.Ceiling)
		if c == nil {
			continue
		}
		row.Ratios = nil
		for i := range min(len(row.Samples), len(c.Samples)) {
			if c.Samples[i] > 0 {
				row.Ratios = append(row.Ratios, row.Samples[i]/c.Samples[i])
			}
		}
		row.Ratio = Median(row.Ratios)
		if row.Target > 0 && len(row.Ratios) > 0 {
			met := row.Ratio >= row.Target
			row.Met = &met
		}
		row.Broken = row.Bound && len(row.Ratios) > 0 && row.Ratio > 1
		if row.Broken {
			row.Met = nil // a ratio to a broken ceiling meets nothing
			row.Note = fmt.Sprintf("ceiling %s (%s %s) is below %s (%s %s), which it bounds: the ceiling measurement is broken",
				c.Key, Num(c.Median), c.Unit, row.Key, Num(row.Median), row.Unit)
			if n := "BROKEN CEILING: " + row.Note; !slices.Contains(r.Notes, n) {
				r.Notes = append(r.Notes, n)
			}
		}
	}
}

// Median of xs (0 for none); the mean of the middle two for an even count.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText prints the table: one line per row with its median, samples,
// and ratio to its ceiling, then the notes.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "coopfs bench %s  (%s; %d CPUs, kernel %s, %s)\n", r.Bench, r.Started.Format("2006-01-02 15:04"), r.Host.CPUs, r.Host.Kernel, r.Host.Go)
	if r.Command != "" {
		fmt.Fprintf(&b, "command: %s\n", r.Command)
	}
	if len(r.Params) > 0 {
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range r.Params {
				if !yield(k) {
					return
				}
			}
		})
		var ps []string
		for _, k := range keys {
			ps = append(ps, k+"="+r.Params[k])
		}
		fmt.Fprintf(&b, "params: %s\n", strings.Join(ps, " "))
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "key\tmeasurement\tmedian\tunit\tsamples\tratio\tvs\ttarget")
	for _, row := range r.Rows {
		ratio, vs, target := "", "", ""
		if row.Ceiling != "" && len(row.Ratios) > 0 {
			ratio = fmt.Sprintf("%.2f", row.Ratio)
			vs = row.Ceiling
		}
		if row.Met != nil {
			verdict := "met"
			if !*row.Met {
				verdict = "MISSED"
			}
			target = fmt.Sprintf(">= %.2f %s", row.Target, verdict)
		}
		if row.Broken {
			target = "CEILING BROKEN"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", row.Key, row.Name, Num(row.Median), row.Unit,
			samples(row.Samples), ratio, vs, target)
	}
	tw.Flush()
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Num formats a figure as the reports print them: no decimals from 100
// on, one from 10, two below.
func Num(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.2f", v)
}

func samples(xs []float64) string {
	var s []string
	for _, x := range xs {
		s = append(s, Num(x))
	}
	return strings.Join(s, " ")
}
