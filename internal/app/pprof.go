package app

import (
	"net/http"
	"net/http/pprof"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Go's profiles are served on their own address, never on the metrics port, which is often
// reachable by whole clusters. The address defaults to loopback: profiles show memory contents
// (heap samples hold strings), so they are for `kubectl port-forward`, not the network. Any
// replica serves them, leader or not.

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

// pprofServer is the profiles' server. It is a manager.Server so that the manager starts it
// with its HTTP servers, before the caches: a profile taken at once covers their first list,
// most of start-up's CPU.
func pprofServer(addr string) *manager.Server {
	timeout := 5 * time.Second
	return &manager.Server{
		Name:            "pprof",
		Server:          &http.Server{Addr: addr, Handler: pprofHandler(), ReadHeaderTimeout: 10 * time.Second},
		ShutdownTimeout: &timeout,
	}
}
