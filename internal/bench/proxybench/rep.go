package proxybench

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"

	"github.com/coopfs/coopfs/internal/bench/report"
	"github.com/coopfs/coopfs/internal/bench/testbed"
)

// clientDisk names the disk cache directory of the second client's mounts.
const clientDisk = "client-cache"

// rep runs one repetition on a new file.
func (b *bench) rep(ctx context.Context, r *report.Report, i int) error {
	name := fmt.Sprintf("file%d", i)
	data := make([]byte, b.cfg.Size)
	rand.Read(data)
	if err := os.WriteFile(filepath.Join(b.export, name), data, 0o644); err != nil {
		return err
	}
	size := b.cfg.Size
	v, err := tcpMBps(ctx, b.tb.Server(), b.a, size)
	if err != nil {
		return fmt.Errorf("wan ceiling: %w", err)
	}
	r.Row("wan-tcp", "TCP, server host → client (the WAN ceiling)", report.UnitMBps).Add(v)
	if v, err = tcpMBps(ctx, b.proxyH, b.b, size); err != nil {
		return fmt.Errorf("lan ceiling: %w", err)
	}
	r.Row("lan-tcp", "TCP, proxy host → client (the LAN ceiling)", report.UnitMBps).Add(v)

	srv, prx := b.tb.Server().AddrPort(portServe).String(), b.proxyH.AddrPort(portProxy).String()
	steps := []struct {
		key, what string
		host      *testbed.Host
		upstream  string
		restart   bool   // restart the proxy before
		drop      bool   // drop the kernel caches before
		disk      string // the mount's --disk-cache, "" for none
		zero      bool   // the server must send nothing
	}{
		{"direct", "a client mounted on the server directly", b.d, srv, false, false, "", false},
		{"first", "a client behind the proxy, first read (proxy cold)", b.a, prx, false, false, "", false},
		{"second", "a second client behind the same proxy", b.b, prx, false, false, clientDisk, true},
		{"warm", "proxy and client restarted, proxy disk cache warm", b.a, prx, true, true, "", true},
		{"client-warm", "the second client restarted on its own disk cache", b.b, prx, false, true, clientDisk, true},
	}
	for _, st := range steps {
		if st.restart {
			if err := b.restartProxy(ctx); err != nil {
				return err
			}
		}
		if st.drop {
			if err := dropCaches(); err != nil {
				return fmt.Errorf("drop caches: %w", err)
			}
		}
		before, err := b.serverBytes(ctx)
		if err != nil {
			return err
		}
		var extra []string
		if st.disk != "" {
			extra = []string{"--disk-cache", filepath.Join(b.cfg.Dir, fmt.Sprintf("%s-%d", st.disk, i)), "--disk-cache-size", "256MiB"}
		}
		m, dir, err := b.mount(ctx, st.host, fmt.Sprintf("%s-%d", st.key, i), st.upstream, extra...)
		if err != nil {
			return err
		}
		v, err := readMBps(filepath.Join(dir, name), size)
		m.Stop()
		if err != nil {
			return fmt.Errorf("%s: %w", st.key, err)
		}
		r.Row(st.key, st.what, report.UnitMBps).Add(v)
		after, err := b.serverBytes(ctx)
		if err != nil {
			return err
		}
		if st.zero {
			r.Row(st.key+"-server-bytes", "file bytes the server sent during "+st.key, "bytes").Add(after - before)
		}
	}
	return nil
}

// restartProxy stops the proxy and starts it again on its disk cache.
func (b *bench) restartProxy(ctx context.Context) error {
	if err := b.proxy.Stop(); err != nil {
		b.proxy.Wait()
	}
	return b.startProxy(ctx)
}
