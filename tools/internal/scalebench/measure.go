package scalebench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/reloader-operator/reloader/internal/ledger"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/testenv/audit"
	"github.com/reloader-operator/reloader/tools/internal/loadtest"
)

// Memory is one sample of the reloader process.
type Memory struct {
	// RSS is VmRSS of /proc/<pid>/status; RSSAnon and RSSFile split it into the memory the
	// process allocated and the pages of its binary mapped from the file (a fixed cost of
	// its code, the same for any client-go program, that grows with no object).
	RSS     uint64 `json:"rssBytes"`
	RSSAnon uint64 `json:"rssAnonBytes"`
	RSSFile uint64 `json:"rssFileBytes"`
	// HeapInuse and HeapAlloc are go_memstats_heap_inuse_bytes and _alloc_bytes of /metrics.
	HeapInuse uint64 `json:"heapInuseBytes"`
	HeapAlloc uint64 `json:"heapAllocBytes"`
	// CPU is process_cpu_seconds_total: the CPU time the process has used since it started,
	// which a leaner heap may cost in collections.
	CPU float64 `json:"cpuSeconds"`
	// Reloads is reloader_reload_executed_total, all samples summed.
	Reloads float64 `json:"-"`
	// Parts is where the RSS comes from (smaps and the runtime's figures).
	Parts Breakdown `json:"parts"`
}

func (m Memory) String() string {
	return fmt.Sprintf("RSS %s (%s anonymous, %s of the binary's file), heap in use %s (allocated %s); CPU %.1f s since start",
		mib(m.RSS), mib(m.RSSAnon), mib(m.RSSFile), mib(m.HeapInuse), mib(m.HeapAlloc), m.CPU)
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// exposition reads the metrics served at metricsURL.
func exposition(metricsURL string) (string, error) {
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get(metricsURL + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// sample reads the process's RSS and the Go heap it reports on its metrics address.
func sample(pid int, metricsURL string) (Memory, error) {
	rss, err := loadtest.StatusBytes(pid, "VmRSS")
	if err != nil {
		return Memory{}, err
	}
	m := Memory{RSS: rss}
	m.RSSAnon, _ = loadtest.StatusBytes(pid, "RssAnon")
	m.RSSFile, _ = loadtest.StatusBytes(pid, "RssFile")
	b, err := exposition(metricsURL)
	if err != nil {
		return m, err
	}
	inuse, _ := loadtest.MetricValue(b, "go_memstats_heap_inuse_bytes")
	alloc, _ := loadtest.MetricValue(b, "go_memstats_heap_alloc_bytes")
	m.HeapInuse, m.HeapAlloc = uint64(inuse), uint64(alloc)
	m.CPU, _ = loadtest.MetricValue(b, "process_cpu_seconds_total")
	m.Reloads, _ = loadtest.MetricValue(b, "reloader_reload_executed_total")
	value := func(name string) uint64 { v, _ := loadtest.MetricValue(b, name); return uint64(v) }
	if bin, other, anon, err := smaps(pid); err == nil {
		m.Parts = Breakdown{Binary: bin, OtherFiles: other, Anon: anon, HeapInuse: m.HeapInuse,
			Stacks: value("go_memstats_stack_inuse_bytes"), GCMeta: value("go_memstats_gc_sys_bytes"),
			Idle: value("go_memstats_heap_idle_bytes") - min(value("go_memstats_heap_released_bytes"), value("go_memstats_heap_idle_bytes"))}
		if anon > m.HeapInuse {
			m.Parts.Runtime = anon - m.HeapInuse
		}
	}
	return m, nil
}

// peak is the highest of each figure over samples.
func peak(samples []Memory) Memory {
	var p Memory
	for _, s := range samples {
		p.RSS, p.HeapInuse, p.HeapAlloc = max(p.RSS, s.RSS), max(p.HeapInuse, s.HeapInuse), max(p.HeapAlloc, s.HeapAlloc)
		p.RSSAnon, p.RSSFile = max(p.RSSAnon, s.RSSAnon), max(p.RSSFile, s.RSSFile)
		p.CPU = max(p.CPU, s.CPU)
		if s.RSS == p.RSS {
			p.Parts = s.Parts
		}
	}
	return p
}

// listBytes is the size of every object of a resource as the API server serves it in JSON,
// listed in pages: what an informer caching every object in full would decode and hold.
func listBytes(ctx context.Context, rc rest.Interface, path string) (int64, error) {
	var total int64
	cont := ""
	for {
		req := rc.Get().AbsPath(path).Param("limit", "500")
		if cont != "" {
			req = req.Param("continue", cont)
		}
		b, err := req.SetHeader("Accept", "application/json").DoRaw(ctx)
		if err != nil {
			return 0, fmt.Errorf("list %s: %w", path, err)
		}
		total += int64(len(b))
		var page struct {
			Metadata struct {
				Continue string `json:"continue"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			return 0, err
		}
		if cont = page.Metadata.Continue; cont == "" {
			return total, nil
		}
	}
}

// percentile of sorted durations, p in [0, 1].
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(int(p*float64(len(sorted))), len(sorted)-1)]
}

// window counts an audit log's requests received in [from, to), watches and Lease renewals left out.
func window(events []audit.Event, from, to time.Time) loadtest.API {
	var in []audit.Event
	for _, e := range events {
		// Lease renewals are the replicas' heartbeat (--shards), not work done for a change.
		if e.Verb != "watch" && e.ObjectRef.Resource != "leases" && !e.Received.Before(from) && e.Received.Before(to) {
			in = append(in, e)
		}
	}
	return loadtest.CountAPI(in)
}

// workloadWrites counts the first-record writes among events received in [from, to): to
// Deployments, and to the ledger of first records.
func workloadWrites(events []audit.Event, from, to time.Time) (n int, last time.Time) {
	for _, e := range events {
		ledgerWrite := e.ObjectRef.Resource == "configmaps" && strings.HasPrefix(e.ObjectRef.Name, ledger.Prefix) && slices.Contains([]string{"create", "update"}, e.Verb)
		workloadWrite := e.ObjectRef.Resource == "deployments" && slices.Contains([]string{"patch", "update"}, e.Verb)
		if (workloadWrite || ledgerWrite) &&
			!e.Received.Before(from) && e.Received.Before(to) {
			n++
			last = e.Received
		}
	}
	return n, last
}

// recordedDeployments counts the Deployments of ns ("": of every namespace) that reloader has
// recorded: with a record annotation, or an entry in its ledger of first records.
func recordedDeployments(ctx context.Context, cl client.Client, ns string) (int, error) {
	var cms corev1.ConfigMapList
	if err := cl.List(ctx, &cms, client.HasLabels{ledger.Label}); err != nil {
		return 0, err
	}
	inLedger := map[types.UID]bool{}
	for i := range cms.Items {
		for _, uid := range ledger.UIDs(&cms.Items[i]) {
			inLedger[uid] = true
		}
	}
	var ds appsv1.DeploymentList
	if err := cl.List(ctx, &ds, client.InNamespace(ns)); err != nil {
		return 0, err
	}
	n := 0
	for _, d := range ds.Items {
		if _, ok := d.Annotations[reload.RecordAnnotation]; ok || inLedger[d.UID] {
			n++
		}
	}
	return n, nil
}
