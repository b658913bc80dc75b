package app

import (
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/reloader-operator/reloader/internal/options"
)

// probeHandlers answer the kubelet's probes: /live and /healthz while the process serves,
// /ready and /readyz once the caches have synced. /live and /ready are the paths of upstream's
// 1.x and 2.x charts and of this project's chart; /healthz and /readyz are upstream v2's.
func probeHandlers(ready *atomic.Bool) map[string]http.Handler {
	live, rdy := liveHandler(), readyHandler(ready)
	return map[string]http.Handler{"/live": live, "/healthz": live, "/ready": rdy, "/readyz": rdy}
}

// addProbeServers serves the probes on their own ports: on --health-addr, which must bind (as
// any address the user named), and on --v2-health-addr, where upstream v2's chart probes when
// --health-addr is not given. That one is best effort: the port may be another process's
// (several reloaders on one host, upstream v2 beside this one), so a busy port is a warning
// and the probes stay on the metrics port. Both are bound here, before the manager starts,
// and served from its first group of runnables, before the caches sync: liveness must answer
// while a large cluster is still being listed.
func addProbeServers(mgr manager.Manager, conf options.Config, ready *atomic.Bool, logger logr.Logger) error {
	if a := conf.HealthAddr; a != "" && a != "0" {
		l, err := net.Listen("tcp", a)
		if err != nil {
			return fmt.Errorf("--health-addr %s: %w", a, err)
		}
		if err := mgr.Add(probeServer("health probes", l, ready)); err != nil {
			_ = l.Close()
			return err
		}
	}
	if a := conf.V2ProbeAddr; a != "" {
		l, err := net.Listen("tcp", a)
		if err != nil {
			stay := "the metrics port (--metrics-addr " + conf.MetricsAddr + ")"
			if conf.HealthAddr != "" {
				stay = "--health-addr " + conf.HealthAddr
			}
			logger.Info("WARNING: the probes are not served on "+a+" (--v2-health-addr, where upstream v2's chart probes /healthz and /readyz): the port is busy; they stay on "+stay+" as /live, /ready, /healthz and /readyz. Set --health-addr to serve them on a port of your choice, or --v2-health-addr=0 to stop trying",
				"addr", a, "error", err.Error())
			return nil
		}
		if err := mgr.Add(probeServer("v2 health probes", l, ready)); err != nil {
			_ = l.Close()
			return err
		}
		logger.Info("serving the probes for upstream v2's chart too", "addr", l.Addr().String(), "paths", "/healthz /readyz /live /ready")
	}
	return nil
}

// probeServer serves probeHandlers on l, on every replica (a follower is alive and ready too).
func probeServer(name string, l net.Listener, ready *atomic.Bool) *manager.Server {
	mux := http.NewServeMux()
	for path, h := range probeHandlers(ready) {
		mux.Handle(path, h)
	}
	return &manager.Server{
		Name:            name,
		Server:          &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		Listener:        l,
		ShutdownTimeout: ptr.To(5 * time.Second),
	}
}
