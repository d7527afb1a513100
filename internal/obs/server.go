package obs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler returns the HTTP handler that serves this process's metrics in the
// Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// MetricsServer serves /metrics on a listening socket.
type MetricsServer struct {
	ln  net.Listener
	srv *http.Server
}

// Listen binds addr (HOST:PORT; port 0 picks a free one) for the /metrics
// server. It fails at once, with a message that says what to do, when the
// address cannot be bound (port in use, bad host). Start serving with Serve.
func (m *Metrics) Listen(addr string) (*MetricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: cannot listen on %s (is the port in use? pick another with --metrics HOST:PORT): %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "coopfs: metrics are at /metrics")
	})
	return &MetricsServer{ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}, nil
}

// Addr returns the address the server listens on (with the port chosen
// when Listen was given port 0).
func (s *MetricsServer) Addr() string { return s.ln.Addr().String() }

// Serve serves until ctx is done, then shuts the server down (waiting at
// most 5 s for scrapes in flight) and returns nil. It returns an error only
// if serving fails for another reason.
func (s *MetricsServer) Serve(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- s.srv.Serve(s.ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("metrics: serving on %s: %w", s.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(sctx)
	if serr := <-done; !errors.Is(serr, http.ErrServerClosed) && serr != nil {
		return fmt.Errorf("metrics: serving on %s: %w", s.Addr(), serr)
	}
	if err != nil {
		s.srv.Close()
		return fmt.Errorf("metrics: shutting down %s: %w", s.Addr(), err)
	}
	return nil
}

// Serve listens on addr and serves /metrics until ctx is done. It returns at
// once with a clear error if addr cannot be bound; otherwise it blocks and
// returns nil after shutting down on ctx cancel. To learn a bind error
// before going on with start-up, use Listen and then go srv.Serve(ctx).
func (m *Metrics) Serve(ctx context.Context, addr string) error {
	s, err := m.Listen(addr)
	if err != nil {
		return err
	}
	return s.Serve(ctx)
}
