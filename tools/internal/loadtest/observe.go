package loadtest

import (
	"context"
	"encoding/json"
	"maps"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/testutil/follower"
)

var workloadGVKs = map[string]schema.GroupVersionKind{
	Deployment:  {Group: "apps", Version: "v1", Kind: Deployment},
	StatefulSet: {Group: "apps", Version: "v1", Kind: StatefulSet},
	DaemonSet:   {Group: "apps", Version: "v1", Kind: DaemonSet},
	CronJob:     {Group: "batch", Version: "v1", Kind: CronJob},
	Job:         {Group: "batch", Version: "v1", Kind: Job},
}

// Observer records every pod-template change of the load test's workloads, with the time it
// was seen. A Job replaced under the same name counts when the new one's template differs. A
// Job made by hand from a CronJob (annotated cronjob.kubernetes.io/instantiate=manual and
// controlled by it: upstream's reload of a CronJob, which leaves the CronJob as it is) counts
// as a change of that CronJob when it first appears.
type Observer struct {
	mu         sync.Mutex
	template   map[string]string
	changes    map[string][]time.Time
	manualJobs map[string]bool
	// first and after are the content checks' view: each workload's template signature
	// (TemplateSignature) when first seen, and after each of its changes.
	first map[string]string
	after map[string][]string
	// gaps counts the lists made again after a watch could not resume (410): the changes
	// made meanwhile were seen once each, late.
	gaps int
}

// manualJobOf returns the CronJob a Job was made from by hand, "" for any other Job.
func manualJobOf(u *unstructured.Unstructured) string {
	if u.GetAnnotations()["cronjob.kubernetes.io/instantiate"] != "manual" {
		return ""
	}
	for _, ref := range u.GetOwnerReferences() {
		if ref.Kind == CronJob && ref.Controller != nil && *ref.Controller {
			return ref.Name
		}
	}
	return ""
}

func newObserver() *Observer {
	return &Observer{template: map[string]string{}, changes: map[string][]time.Time{}, manualJobs: map[string]bool{},
		first: map[string]string{}, after: map[string][]string{}}
}

// Observe watches every workload kind labelled loadtest=true until ctx ends.
func Observe(ctx context.Context, c client.WithWatch) (*Observer, error) {
	o := newObserver()
	started := make(chan error, len(workloadGVKs))
	for kind, gvk := range workloadGVKs {
		go o.watch(ctx, c, kind, gvk, started)
	}
	for range workloadGVKs {
		if err := <-started; err != nil {
			return nil, err
		}
	}
	return o, nil
}

func (o *Observer) watch(ctx context.Context, c client.WithWatch, kind string, gvk schema.GroupVersionKind, started chan<- error) {
	newList := func() *unstructured.UnstructuredList {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		return list
	}
	selector := client.MatchingLabels{"loadtest": "true"}
	// The watch resumes from the last version seen when the API server ends it (a timeout, a
	// watcher too slow for it under load); only when that version is gone (410) is there a
	// new list, whose changes since are one each at the list's time: a gap, counted.
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		return follower.ExpiredAsEvent(c.Watch(ctx, newList(), selector, &client.ListOptions{Raw: &opts}))
	}}
	first := true
	for ctx.Err() == nil {
		list := newList()
		err := c.List(ctx, list, selector)
		if first {
			started <- err
			first = false
			if err != nil {
				return
			}
		} else if err == nil {
			o.mu.Lock()
			o.gaps++
			o.mu.Unlock()
		}
		if err != nil {
			time.Sleep(time.Second)
			continue
		}
		for i := range list.Items {
			o.event(kind, &list.Items[i])
		}
		w, err := watchtools.NewRetryWatcherWithContext(ctx, list.GetResourceVersion(), lw)
		if err != nil {
			continue
		}
		for ev := range w.ResultChan() {
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			if u, ok := ev.Object.(*unstructured.Unstructured); ok {
				o.event(kind, u)
			}
		}
		w.Stop()
	}
}

// event records what one watch event (or list item) of kind carried.
func (o *Observer) event(kind string, u *unstructured.Unstructured) {
	if kind == Job {
		if cronJob := manualJobOf(u); cronJob != "" {
			o.mu.Lock()
			// A list made again has the Jobs that exist: each counts once.
			if !o.manualJobs[string(u.GetUID())] {
				o.manualJobs[string(u.GetUID())] = true
				key := CronJob + "/" + u.GetNamespace() + "/" + cronJob
				o.changes[key] = append(o.changes[key], time.Now())
				// A Job made by hand is a run of its own: never the same as another.
				o.after[key] = append(o.after[key], "job "+string(u.GetUID()))
			}
			o.mu.Unlock()
			return
		}
	}
	tpl, _, _ := unstructured.NestedMap(u.Object, TemplatePath(kind)...)
	b, _ := json.Marshal(tpl)
	key := kind + "/" + u.GetNamespace() + "/" + u.GetName()
	o.saw(key, string(b), time.Now())
}

// saw records the template a watch event carried for key, seen at t.
func (o *Observer) saw(key, template string, t time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	prev, seen := o.template[key]
	switch {
	case !seen:
		o.first[key] = TemplateSignature(template)
	case prev != template:
		o.changes[key] = append(o.changes[key], t)
		o.after[key] = append(o.after[key], TemplateSignature(template))
	}
	o.template[key] = template
}

// Signatures returns each workload's template signature when first seen and after each of its
// changes (in the order of Changes).
func (o *Observer) Signatures() (first map[string]string, after map[string][]string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	first = maps.Clone(o.first)
	after = make(map[string][]string, len(o.after))
	for k, v := range o.after {
		after[k] = append([]string(nil), v...)
	}
	return first, after
}

// Changes returns the times each workload's template changed.
func (o *Observer) Changes() map[string][]time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[string][]time.Time, len(o.changes))
	for k, v := range o.changes {
		out[k] = append([]time.Time(nil), v...)
	}
	return out
}

// Gaps counts the times a watch could not resume and the workloads were listed again: the
// changes made while it was down are counted once each, at the time of the list.
func (o *Observer) Gaps() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.gaps
}

// Seen reports how many workloads the observer has seen.
func (o *Observer) Seen() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.template)
}
