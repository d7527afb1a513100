package wire

import (
	"context"
	"slices"
	"testing"
	"time"
)

// BenchmarkPingPair is a wire Ping round trip between two connections of
// this process over loopback TCP (plaintext and TLS), the server serving
// it inline: the wire layer's own cost without another process.
func BenchmarkPingPair(b *testing.B) {
	for _, x := range []struct {
		name string
		sec  *Security
	}{{"plain", plain("s3cret-s3cret-s3cret")}, {"tls", withTLS("s3cret-s3cret-s3cret")}} {
		b.Run(x.name, func(b *testing.B) {
			t := &testing.T{}
			shs, chs, serr, cerr := handshakePair(t, x.sec, x.sec, "localhost", nil)
			if serr != nil || cerr != nil {
				b.Fatal(serr, cerr)
			}
			h := HandlerFunc(func(context.Context, *Conn, Msg) (Msg, error) { return &OK{}, nil })
			srv := NewConn(shs.Conn, shs.Reader, ConnConfig{Handler: h, Inline: func(Msg) bool { return true }, InlineQuick: func(Msg) bool { return true }})
			cli := NewConn(chs.Conn, chs.Reader, ConnConfig{})
			defer srv.Close()
			defer cli.Close()
			ctx := context.Background()
			lat := make([]time.Duration, 0, b.N)
			for b.Loop() {
				start := time.Now()
				if _, err := cli.Call(ctx, &Ping{}); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
		})
	}
}
