package nasd

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// Run replays w through a simulator built from cfg and returns its Stats
// after the first warmUp accesses (which warm the caches and are not
// counted). The simulator's ServerOf is w's when w is a *Workload. Run
// checks ctx every 64Ki accesses.
func Run(ctx context.Context, cfg Config, w *Workload, warmUp int64) (Stats, error) {
	if cfg.ServerOf == nil {
		cfg.ServerOf = w.ServerOf
	}
	if cfg.Servers != w.cfg.Servers {
		return Stats{}, fmt.Errorf("workload has %d servers, config %d", w.cfg.Servers, cfg.Servers)
	}
	s, err := New(cfg)
	if err != nil {
		return Stats{}, err
	}
	src, err := w.Open()
	if err != nil {
		return Stats{}, err
	}
	for n := int64(0); ; n++ {
		a, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Stats{}, fmt.Errorf("read %s: %w", w.Name(), err)
		}
		if n == warmUp {
			s.ResetStats()
		}
		if a.Client >= cfg.Clients {
			return Stats{}, fmt.Errorf("%s: access %d names client %d, but there are %d clients", w.Name(), n, a.Client, cfg.Clients)
		}
		s.Access(a, nil)
		if n&0xffff == 0 {
			if err := ctx.Err(); err != nil {
				return Stats{}, err
			}
		}
	}
	return s.Stats(), nil
}
