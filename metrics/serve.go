package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// CheckAddress accepts a Unix socket path (absolute, or "unix:PATH") or a
// loopback host:port, and refuses anything else: /metrics has no
// authentication, so it must not be reachable from another machine.
func CheckAddress(addr string) (network, address string, err error) {
	if p, ok := strings.CutPrefix(addr, "unix:"); ok || strings.HasPrefix(addr, "/") {
		if !ok {
			p = addr
		}
		if !filepath.IsAbs(p) {
			return "", "", fmt.Errorf("metrics address %q: a Unix socket path must be absolute", addr)
		}
		return "unix", p, nil
	}
	refuse := func(why string) error {
		return fmt.Errorf("metrics address %q: %s; the endpoint has no authentication, so it listens only on "+
			"a loopback address (127.0.0.1:PORT, [::1]:PORT, localhost:PORT) or a Unix socket path", addr, why)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", "", refuse("not HOST:PORT or an absolute path")
	}
	if host == "" {
		return "", "", refuse("an empty host listens on every interface")
	}
	if host != "localhost" {
		ip := net.ParseIP(host)
		if ip == nil {
			return "", "", refuse("a host name other than localhost")
		}
		if !ip.IsLoopback() {
			return "", "", refuse("not a loopback address")
		}
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return "", "", refuse("bad port")
	}
	return "tcp", net.JoinHostPort(host, port), nil
}

// Listen opens addr after CheckAddress. A Unix socket replaces a stale file
// and is made 0660, like the daemon's own socket.
func Listen(addr string) (net.Listener, error) {
	network, address, err := CheckAddress(addr)
	if err != nil {
		return nil, err
	}
	if network == "unix" {
		if err := os.MkdirAll(filepath.Dir(address), 0o755); err != nil {
			return nil, fmt.Errorf("metrics socket directory: %w", err)
		}
		if c, err := net.DialTimeout("unix", address, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("metrics socket %s: something is already serving there", address)
		}
		os.Remove(address)
	}
	ln, err := net.Listen(network, address)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	if network == "unix" {
		if err := os.Chmod(address, 0o660); err != nil {
			ln.Close()
			return nil, err
		}
	}
	return ln, nil
}

// Handler serves /metrics for src, with the Go runtime's and the
// process's own series beside s4d's.
func Handler(src Source, version, commit string, log *slog.Logger) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewCollector(src, version, commit), collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn), Timeout: scrapeTimeout}))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "s4d: metrics are at /metrics")
	})
	return mux
}

// Serve serves h on ln until ctx ends, then closes it. It returns once
// the server and its shutdown have finished: nothing it started outlives it.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: 2 * scrapeTimeout,
		IdleTimeout: time.Minute, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	served, shut := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(shut)
		select {
		case <-ctx.Done():
		case <-served:
			return
		}
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	log.Info("serving metrics", "addr", ln.Addr().String())
	err := srv.Serve(ln)
	close(served)
	<-shut
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("metrics endpoint stopped", "err", err)
	}
	if ln.Addr().Network() == "unix" {
		os.Remove(ln.Addr().String())
	}
}
