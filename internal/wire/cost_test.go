package wire

import (
	"context"
	"syscall"
	"testing"
	"time"
)

func cpuNow() time.Duration {
	var r syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &r)
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}

// BenchmarkBlockTransfer moves 1 MiB blocks over loopback TCP, plaintext
// and TLS, and reports the CPU time per GB of both ends (one process).
func BenchmarkBlockTransfer(b *testing.B) {
	block := make([]byte, 1<<20)
	for _, mode := range []struct {
		name string
		sec  *Security
	}{{"insecure", plain("cost secret 0123456789abcdef")}, {"tls", withTLS("cost secret 0123456789abcdef")}} {
		b.Run(mode.name, func(b *testing.B) {
			h := HandlerFunc(func(ctx context.Context, c *Conn, m Msg) (Msg, error) { return &BlockReply{Data: block}, nil })
			cli, _, err := pair(&testing.T{}, mode.sec, mode.sec, h, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(1 << 20)
			c0 := cpuNow()
			for b.Loop() {
				if _, err := cli.Call(context.Background(), &ReadBlock{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric((cpuNow()-c0).Seconds()/(float64(b.N)*(1<<20)/1e9), "cpu-s/GB")
		})
	}
}
