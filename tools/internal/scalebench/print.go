package scalebench

import (
	"fmt"
	"io"
	"time"
)

// Print writes the figures as docs/benchmarks.md quotes them.
func (f *Figures) Print(w io.Writer) {
	ms := func(d time.Duration) string { return d.Round(time.Millisecond).String() }
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	full := f.FullCacheBytes["configmaps"] + f.FullCacheBytes["secrets"] + f.FullCacheBytes["deployments"]
	p("objects:            %d ConfigMaps, %d Secrets, %d Deployments (%d of them use one shared ConfigMap); created in %s",
		f.Objects.ConfigMaps, f.Objects.Secrets, f.Objects.Deployments, f.Objects.Shared, f.SetupDuration.Round(time.Second))
	p("full caching cost:  %s as listed (JSON): ConfigMaps %s, Secrets %s, Deployments %s",
		mib(uint64(full)), mib(uint64(f.FullCacheBytes["configmaps"])), mib(uint64(f.FullCacheBytes["secrets"])), mib(uint64(f.FullCacheBytes["deployments"])))
	p("client rate:        %s", f.QPS)
	api := "not served (a drop-in install: upstream's chart has no CRD)"
	if f.ConfigAPI {
		api = "served (the chart installs its CRD)"
	}
	p("ReloaderConfig API: %s", api)
	p("start:              ready (caches synced) after %s", ms(f.Ready))
	p("first sight:        %d writes to record %d Deployments, the last %s after start", f.FirstSightWrites, f.Objects.Deployments, ms(f.FirstSight))
	p("after sync:         %s", f.AfterSync)
	p("  where it goes:    %s", f.AfterSync.Parts)
	for _, r := range f.Replicas {
		p("replica %s: %d shards; caches %d of %d ConfigMaps, %d of %d Secrets, %d of %d Deployments (%.0f%%)",
			r.Name, r.Shards, r.Cached["ConfigMap"], f.Objects.ConfigMaps, r.Cached["Secret"], f.Objects.Secrets,
			r.Cached["Deployment"], f.Objects.Deployments, 100*float64(r.Cached["Deployment"])/float64(max(f.Objects.Deployments, 1)))
		p("  after sync:       %s", r.AfterSync)
		p("  during changes:   peak %s", r.DuringChanges)
	}
	p("changes:            %d ConfigMaps changed; %d reloads of %d Deployments expected, %d missed, %d duplicates",
		f.Changes, f.Reloads, f.Expected, f.Missed, f.Duplicates)
	p("reload rate:        %.1f reloads/s", f.ReloadsPerSec)
	when := "after the last first-sight record"
	if f.DuringFirstSight > 0 {
		when = fmt.Sprintf("starting %s after ready, while first-sight records are written", f.DuringFirstSight)
	}
	p("latency:            change -> patch p50 %s, p95 %s, p99 %s (coalescing window included; changes %s)", ms(f.LatencyP50), ms(f.LatencyP95), ms(f.LatencyP99), when)
	if a := f.AfterFirstSight; a != nil {
		p("  and after it:     the same changes again after the last first-sight record: p50 %s, p95 %s, p99 %s, %d missed, %d duplicates",
			ms(a.P50), ms(a.P95), ms(a.P99), a.Missed, a.Duplicates)
	}
	firsts := ""
	if f.DuringFirstSight > 0 {
		firsts = " (the first records written meanwhile counted in)"
	}
	p("API per reload:     %.2f requests (%d in all: %v), %.2f Deployment writes%s",
		f.APIPerReload, f.ChangeAPI.Total, f.ChangeAPI.ByVerb, f.WritesPerReload, firsts)
	p("during changes:     peak %s", f.DuringChanges)
	p("  where it goes:    %s", f.DuringChanges.Parts)
	printFanOut(p, "fan-out:          ", f.FanOut)
	if f.Paced != nil {
		printFanOut(p, "fan-out paced:    ", *f.Paced)
	}
	p("LIST after sync:    %d", f.ListsAfter)
	p("requests in all:    %d (%v)", f.RequestsAll.Total, f.RequestsAll.ByVerb)
	p("at the end:         %s", f.End)
}

func printFanOut(p func(string, ...any), label string, fo FanOut) {
	if fo.Error != "" {
		p("%s %s", label, fo.Error)
		return
	}
	p("%s %d of %d Deployments patched in %s (%.1f/s, first to last) with %v",
		label, fo.Patched, fo.Workloads, fo.Duration.Round(time.Millisecond), fo.Rate, fo.Args)
}
