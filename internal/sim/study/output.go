package study

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/coopfs/coopfs/internal/sim"
)

// WriteJSON writes one JSON object per (algorithm, configuration), as an
// array.
func WriteJSON(w io.Writer, rows []sim.Metrics) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if rows == nil {
		rows = []sim.Metrics{}
	}
	return enc.Encode(rows)
}

// csvColumns are the CSV columns: name and how to get the value.
var csvColumns = []struct {
	name string
	get  func(m *sim.Metrics) string
}{
	{"algorithm", func(m *sim.Metrics) string { return m.Algorithm }},
	{"config", func(m *sim.Metrics) string { return m.Config }},
	{"workload", func(m *sim.Metrics) string { return m.Workload }},
	{"accesses", func(m *sim.Metrics) string { return i64(m.Accesses) }},
	{"reads", func(m *sim.Metrics) string { return i64(m.Reads) }},
	{"avg_access_ms", func(m *sim.Metrics) string { return f64(m.AvgAccessMs) }},
	{"local_ms", func(m *sim.Metrics) string { return f64(m.Breakdown.Local) }},
	{"remote_ms", func(m *sim.Metrics) string { return f64(m.Breakdown.Remote) }},
	{"server_ms", func(m *sim.Metrics) string { return f64(m.Breakdown.Server) }},
	{"disk_ms", func(m *sim.Metrics) string { return f64(m.Breakdown.Disk) }},
	{"message_ms", func(m *sim.Metrics) string { return f64(m.Breakdown.Message) }},
	{"hits_local", func(m *sim.Metrics) string { return i64(m.Hits.Local) }},
	{"hits_remote", func(m *sim.Metrics) string { return i64(m.Hits.Remote) }},
	{"hits_server", func(m *sim.Metrics) string { return i64(m.Hits.Server) }},
	{"hits_disk", func(m *sim.Metrics) string { return i64(m.Hits.Disk) }},
	{"hits_discard", func(m *sim.Metrics) string { return i64(m.Hits.Discard) }},
	{"local_hit_ratio", func(m *sim.Metrics) string { return f64(m.LocalHitRatio) }},
	{"server_hit_ratio", func(m *sim.Metrics) string { return f64(m.ServerHitRatio) }},
	{"manager_msgs_per_access", func(m *sim.Metrics) string { return f64(m.ManagerMsgsPerAccess) }},
	{"manager_consistency", func(m *sim.Metrics) string { return f64(m.ManagerByCause.Consistency) }},
	{"manager_lookup", func(m *sim.Metrics) string { return f64(m.ManagerByCause.Lookup) }},
	{"manager_replacement", func(m *sim.Metrics) string { return f64(m.ManagerByCause.Replacement) }},
	{"lookup_msgs_per_miss", func(m *sim.Metrics) string { return f64(m.LookupMsgsPerMiss) }},
	{"replacement_msgs_per_local_miss", func(m *sim.Metrics) string { return f64(m.ReplMsgsPerLocalMiss) }},
	{"hint_correctness", func(m *sim.Metrics) string { return f64(m.HintCorrectness) }},
	{"absolute_correctness", func(m *sim.Metrics) string { return f64(m.AbsoluteCorrectness) }},
	{"false_negatives", func(m *sim.Metrics) string { return f64(m.FalseNegatives) }},
	{"unnecessary_forwards", func(m *sim.Metrics) string { return f64(m.UnnecessaryForwards) }},
	{"discard_hit_ratio", func(m *sim.Metrics) string { return f64(m.DiscardHitRatio) }},
	{"forward_miss_rate", func(m *sim.Metrics) string { return f64(m.ForwardMissRate) }},
	{"network_load_avg_kbps", func(m *sim.Metrics) string { return f64(m.NetworkLoadAvgKbps) }},
	{"network_load_max_kbps", func(m *sim.Metrics) string { return f64(m.NetworkLoadMaxKbps) }},
	{"client_load_avg_kbps", func(m *sim.Metrics) string { return f64(m.ClientLoadAvgKbps) }},
	{"client_load_max_kbps", func(m *sim.Metrics) string { return f64(m.ClientLoadMaxKbps) }},
}

func i64(v int64) string   { return strconv.FormatInt(v, 10) }
func f64(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

// WriteCSV writes the rows as CSV with a header.
func WriteCSV(w io.Writer, rows []sim.Metrics) error {
	cw := csv.NewWriter(w)
	hdr := make([]string, len(csvColumns))
	for i, c := range csvColumns {
		hdr[i] = c.name
	}
	cw.Write(hdr)
	for i := range rows {
		rec := make([]string, len(csvColumns))
		for j, c := range csvColumns {
			rec[j] = c.get(&rows[i])
		}
		cw.Write(rec)
	}
	cw.Flush()
	return cw.Error()
}

// WriteText writes the rows as an aligned text table.
func WriteText(w io.Writer, rows []sim.Metrics) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "algorithm\tconfig\tavg ms\tlocal%\tremote%\tserver%\tdisk%\tmgr/acc\tlookup/miss\trepl/miss\thint ok%\tdiscard%\tfwd miss%\t")
	for _, m := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%.3f\t%.2f\t%.2f\t%.2f\t%.2f\t%.4f\t%.3f\t%.3f\t%.2f\t%.2f\t%.2f\t\n",
			m.Algorithm, m.Config, m.AvgAccessMs, 100*m.HitDistr.Local, 100*m.HitDistr.Remote,
			100*m.HitDistr.Server, 100*m.HitDistr.Disk, m.ManagerMsgsPerAccess, m.LookupMsgsPerMiss,
			m.ReplMsgsPerLocalMiss, 100*m.HintCorrectness, 100*m.DiscardHitRatio, 100*m.ForwardMissRate)
	}
	return tw.Flush()
}

// WriteTable writes a derived table as aligned text.
func WriteTable(w io.Writer, t Table) error {
	fmt.Fprintf(w, "\n%s\n", t.Title)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(t.Header, "\t")+"\t")
	for _, r := range t.Rows {
		fmt.Fprintln(tw, strings.Join(r, "\t")+"\t")
	}
	return tw.Flush()
}

// WriteReport writes the report's rows and tables as text to w and, if dir
// is not empty, NAME.csv, NAME.json, NAME-TABLE.csv and the plots (PNG and
// SVG) to dir. It returns the files written.
func WriteReport(w io.Writer, r *Report, dir string) ([]string, error) {
	fmt.Fprintf(w, "study %s\n\n", r.Study)
	if err := WriteText(w, r.Rows); err != nil {
		return nil, err
	}
	for _, t := range r.Tables {
		if err := WriteTable(w, t); err != nil {
			return nil, err
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "\nnote: %s\n", n)
	}
	if dir == "" {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create output directory: %w", err)
	}
	var files []string
	write := func(name string, f func(io.Writer) error) error {
		path := filepath.Join(dir, name)
		fh, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := f(fh); err != nil {
			fh.Close()
			return fmt.Errorf("write %s: %w", path, err)
		}
		files = append(files, path)
		return fh.Close()
	}
	if err := write(r.Study+".csv", func(w io.Writer) error { return WriteCSV(w, r.Rows) }); err != nil {
		return files, err
	}
	if err := write(r.Study+".json", func(w io.Writer) error { return WriteJSON(w, r.Rows) }); err != nil {
		return files, err
	}
	for _, t := range r.Tables {
		err := write(r.Study+"-"+t.Name+".csv", func(w io.Writer) error {
			cw := csv.NewWriter(w)
			cw.Write(t.Header)
			cw.WriteAll(t.Rows)
			return cw.Error()
		})
		if err != nil {
			return files, err
		}
	}
	for _, p := range r.Plots {
		for _, ext := range []string{"png", "svg"} {
			path := filepath.Join(dir, r.Study+"-"+p.Name+"."+ext)
			if err := p.Save(path); err != nil {
				return files, err
			}
			files = append(files, path)
		}
	}
	return files, nil
}
