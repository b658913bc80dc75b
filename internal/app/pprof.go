package app

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// pprofServer serves Go's profiles on its own address, never on the metrics port, which is
// often reachable by whole clusters. The address defaults to loopback: profiles show memory
// contents (heap samples hold strings), so they are for `kubectl port-forward`, not the network.
type pprofServer struct{ addr string }

// pprofHandler serves the profiles. /debug/pprof/cmdline is left out on purpose: it prints
// the command line, and --webhook-url carries a token in its path.
func pprofHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/debug/pprof/cmdline" {
			http.NotFound(w, r)
			return
		}
		pprof.Index(w, r)
	})
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

func (p pprofServer) Start(ctx context.Context) error {
	srv := &http.Server{Handler: pprofHandler(), ReadHeaderTimeout: 10 * time.Second}
	l, err := net.Listen("tcp", p.addr)
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// NeedLeaderElection is false: profile any replica.
func (pprofServer) NeedLeaderElection() bool { return false }
