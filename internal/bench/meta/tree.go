package meta

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// treeInfo describes the tree the tarball holds.
type treeInfo struct {
	tarball string // path of the tarball
	top     string // the tarball's top directory (e.g. "src")
	source  string // what it was made from, for the report
	files   int    // regular files
	dirs    int    // directories, the top one included
	bytes   int64  // bytes of the regular files
}

// goSrc is the src/ directory of the Go installation.
func goSrc(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOROOT").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOROOT (for the default tree; or give --tree DIR or --gen-files N): %w", err)
	}
	src := filepath.Join(strings.TrimSpace(string(out)), "src")
	if st, err := os.Stat(src); err != nil || !st.IsDir() {
		return "", fmt.Errorf("the Go source tree %s is missing: give --tree DIR or --gen-files N", src)
	}
	return src, nil
}

// prepareTree writes the tarball of cfg's tree into dir.
func prepareTree(ctx context.Context, cfg *Config, dir string) (*treeInfo, error) {
	src := cfg.Tree
	info := &treeInfo{}
	switch {
	case cfg.GenFiles > 0:
		src = filepath.Join(dir, "gen", "tree")
		if err := genTree(src, cfg.GenFiles); err != nil {
			return nil, err
		}
		info.source = fmt.Sprintf("generated: %d small files", cfg.GenFiles)
	case src == "":
		var err error
		if src, err = goSrc(ctx); err != nil {
			return nil, err
		}
		info.source = "Go source tree " + src
	default:
		info.source = src
	}
	src, err := filepath.Abs(src)
	if err != nil {
		return nil, err
	}
	if err := info.count(src); err != nil {
		return nil, err
	}
	info.top = filepath.Base(src)
	info.tarball = filepath.Join(dir, "tree.tar")
	out, err := exec.CommandContext(ctx, "tar", "-cf", info.tarball, "-C", filepath.Dir(src), info.top).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("tar -cf of %s: %w: %s", src, err, strings.TrimSpace(string(out)))
	}
	if cfg.GenFiles > 0 {
		if err := os.RemoveAll(filepath.Join(dir, "gen")); err != nil {
			return nil, err
		}
	}
	return info, nil
}

func (t *treeInfo) count(src string) error {
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			t.dirs++
		case d.Type().IsRegular():
			t.files++
			if fi, err := d.Info(); err == nil {
				t.bytes += fi.Size()
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("walk the tree %s: %w", src, err)
	}
	if t.files == 0 {
		return fmt.Errorf("the tree %s holds no files", src)
	}
	return nil
}

// genTree writes n small files of source-like text into nested
// directories (about 10 files per directory, 3 levels), sizes 200 B to 16 KiB.
func genTree(root string, n int) error {
	rng := rand.New(rand.NewPCG(9, uint64(n)))
	words := []string{"func", "return", "if", "err", "nil", "for", "range", "var", "type", "struct", "package", "import", "ctx", "buf"}
	for i := range n {
		dir := filepath.Join(root, fmt.Sprintf("d%02d", i/1000), fmt.Sprintf("e%02d", i/100%10), fmt.Sprintf("f%d", i/10%10))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("generate tree: %w", err)
		}
		size := 200 + rng.IntN(16<<10-200)
		var b strings.Builder
		for b.Len() < size {
			b.WriteString(words[rng.IntN(len(words))])
			if rng.IntN(8) == 0 {
				b.WriteByte('\n')
			} else {
				b.WriteByte(' ')
			}
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("file%d.go", i)), []byte(b.String()[:size]), 0o644); err != nil {
			return fmt.Errorf("generate tree: %w", err)
		}
	}
	return nil
}

// pyPackage is the layout of the generated Python package tree: `pkg`
// with sub-packages a0..aA-1, each with b0..bB-1, each with modules.
type pyPackage struct{ a, b, m int }

func newPyPackage(modules int) pyPackage {
	// 300 modules: 6 × 5 × 10.
	p := pyPackage{a: 6, b: 5}
	p.m = max(1, (modules+p.a*p.b-1)/(p.a*p.b))
	if modules < p.a*p.b {
		p.a, p.b, p.m = 1, 1, modules
	}
	return p
}

func (p pyPackage) modules() int { return p.a * p.b * p.m }

// write writes the package into dir (dir/pkg/...), with pkg/all.py
// importing every module.
func (p pyPackage) write(dir string) error {
	var all strings.Builder
	all.WriteString("# imports every module of the generated package\n")
	write := func(path, text string) error {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			return fmt.Errorf("generate the Python package: %w", err)
		}
		return nil
	}
	for a := range p.a {
		for b := range p.b {
			d := filepath.Join(dir, "pkg", fmt.Sprintf("a%d", a), fmt.Sprintf("b%d", b))
			if err := os.MkdirAll(d, 0o755); err != nil {
				return fmt.Errorf("generate the Python package: %w", err)
			}
			if err := write(filepath.Join(d, "__init__.py"), ""); err != nil {
				return err
			}
			for m := range p.m {
				name := fmt.Sprintf("m%d", m)
				text := fmt.Sprintf("\"\"\"Module %d of a%d.b%d.\"\"\"\nimport os\n\nVALUE = %d\n\n\ndef f%d(x):\n    return x * VALUE + len(os.sep)\n\n\nclass C%d:\n    def g(self):\n        return f%d(%d)\n",
					m, a, b, a*1000+b*100+m, m, m, m, m)
				if err := write(filepath.Join(d, name+".py"), text); err != nil {
					return err
				}
				fmt.Fprintf(&all, "import pkg.a%d.b%d.%s\n", a, b, name)
			}
		}
		if err := write(filepath.Join(dir, "pkg", fmt.Sprintf("a%d", a), "__init__.py"), ""); err != nil {
			return err
		}
	}
	if err := write(filepath.Join(dir, "pkg", "__init__.py"), ""); err != nil {
		return err
	}
	return write(filepath.Join(dir, "pkg", "all.py"), all.String())
}
