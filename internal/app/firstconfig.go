package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiwatch "k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/reloader-operator/reloader/api/v1alpha1"
	"github.com/reloader-operator/reloader/internal/options"
)

// errConfigAppeared stops a manager built while no ReloaderConfig existed: Run builds it
// again with ReloaderConfigs on.
var errConfigAppeared = errors.New("a ReloaderConfig appeared")

// firstConfigAgent names the requests of firstConfig in the API server's audit log.
const firstConfigAgent = "reloader-first-config"

// firstConfig waits, while reloader reads no ReloaderConfig because none exists, for the
// first one in the namespaces it watches: a list of one and a watch, of the objects'
// metadata alone, per namespace. It is what a cluster that uses no ReloaderConfig pays
// instead of their informer, the handler every controller adds to it, the status and
// generic-target controllers, and the labels the caches would keep for selectors.
type firstConfig struct {
	client metadata.Interface
	// namespaces are the namespaces watched, [""] for all.
	namespaces []string
	// fieldSelector leaves out the ignored namespaces, as the cache does.
	fieldSelector string
	retry         time.Duration
	log           logr.Logger
}

func newFirstConfig(cfg *rest.Config, conf options.Config, logger logr.Logger) (*firstConfig, error) {
	c, err := metadata.NewForConfig(rest.AddUserAgent(rest.CopyConfig(cfg), firstConfigAgent))
	if err != nil {
		return nil, err
	}
	f := &firstConfig{client: c, namespaces: conf.Namespaces, retry: time.Second, log: logger.WithName("reloaderconfigs")}
	if len(f.namespaces) == 0 {
		f.namespaces = []string{""}
	}
	if conf.NamespaceFilter != nil {
		f.fieldSelector = conf.NamespaceFilter.String()
	}
	return f, nil
}

func (f *firstConfig) resource(ns string) metadata.ResourceInterface {
	return f.client.Resource(v1alpha1.GroupVersion.WithResource("reloaderconfigs")).Namespace(ns)
}

// any reports whether a ReloaderConfig exists in a watched namespace.
func (f *firstConfig) any(ctx context.Context) (bool, error) {
	for _, ns := range f.namespaces {
		list, err := f.resource(ns).List(ctx, metav1.ListOptions{Limit: 1, FieldSelector: f.fieldSelector})
		if err != nil {
			return false, fmt.Errorf("list ReloaderConfigs: %w", err)
		}
		if len(list.Items) > 0 {
			return true, nil
		}
	}
	return false, nil
}

// Start returns errConfigAppeared once a ReloaderConfig exists, nil when ctx ends first.
func (f *firstConfig) Start(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	found := make(chan struct{}, len(f.namespaces))
	for _, ns := range f.namespaces {
		go func() {
			if f.wait(ctx, ns) {
				found <- struct{}{}
			}
		}()
	}
	select {
	case <-found:
		return errConfigAppeared
	case <-ctx.Done():
		return nil
	}
}

// NeedLeaderElection is false: a follower builds its caches as the leader does, so that it
// can take over at once.
func (*firstConfig) NeedLeaderElection() bool { return false }

// wait lists ns and watches it from the list's version, again after each end of the watch,
// until a ReloaderConfig is seen (true) or ctx ends (false). Each list sees what was created
// while no watch ran, so none is missed between them.
func (f *firstConfig) wait(ctx context.Context, ns string) bool {
	for ctx.Err() == nil {
		list, err := f.resource(ns).List(ctx, metav1.ListOptions{Limit: 1, FieldSelector: f.fieldSelector})
		if err == nil && len(list.Items) > 0 {
			return true
		}
		if err == nil {
			var w apiwatch.Interface
			w, err = f.resource(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion, FieldSelector: f.fieldSelector,
				AllowWatchBookmarks: true})
			if err == nil {
				added := f.added(ctx, w)
				w.Stop()
				if added {
					return true
				}
				continue
			}
		}
		if ctx.Err() == nil {
			f.log.Error(err, "waiting for the first ReloaderConfig; retrying", "namespace", ns)
		}
		select {
		case <-ctx.Done():
		case <-time.After(f.retry):
		}
	}
	return false
}

// added reads w until a ReloaderConfig is added (true), or the watch ends or fails (false:
// list again).
func (f *firstConfig) added(ctx context.Context, w apiwatch.Interface) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case ev, ok := <-w.ResultChan():
			switch {
			case !ok || ev.Type == apiwatch.Error:
				return false
			case ev.Type == apiwatch.Added || ev.Type == apiwatch.Modified:
				return true
			}
		}
	}
}
