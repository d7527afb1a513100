package report

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Result is what a benchmark writes: a table and its JSON.
type Result interface {
	WriteText(w io.Writer) error
	WriteJSON(w io.Writer) error
}

// Output says where a benchmark's results go besides the table on stdout:
// the `--json FILE` and `--out DIR` flags every benchmark shares.
type Output struct {
	JSON string // also write the JSON here
	Dir  string // write NAME.json, NAME.txt and the plot NAME.png/.svg here
}

// Write prints res's table to stdout and writes the files o asks for,
// named after name; plot draws the plot into the paths it is given.
func (o Output) Write(res Result, name string, plot func(paths ...string) error, stdout io.Writer) error {
	if err := res.WriteText(stdout); err != nil {
		return err
	}
	writeJSON := func(path string) error {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := res.WriteJSON(f); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	if o.JSON != "" {
		if err := writeJSON(o.JSON); err != nil {
			return fmt.Errorf("--json: %w", err)
		}
	}
	if o.Dir == "" {
		return nil
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	base := filepath.Join(o.Dir, name)
	if err := writeJSON(base + ".json"); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	var table strings.Builder
	_ = res.WriteText(&table)
	if err := os.WriteFile(base+".txt", []byte(table.String()), 0o644); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	if err := plot(base+".png", base+".svg"); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s.{json,txt,png,svg}\n", base)
	return nil
}
