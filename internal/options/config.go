package options

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/reloader-operator/reloader/internal/approval"
	"github.com/reloader-operator/reloader/internal/flap"
	"github.com/reloader-operator/reloader/internal/reload"
	"github.com/reloader-operator/reloader/internal/reloaderconfig"
	"github.com/reloader-operator/reloader/internal/shard"
	"github.com/reloader-operator/reloader/internal/source"
	"github.com/reloader-operator/reloader/internal/workload"
)

// Config is Options checked and parsed once, at start-up: the values reloader runs with, in
// the types it uses. Only Parse makes one, so nothing downstream parses a flag again.
type Config struct {
	// Options are the values as given (Namespaces and NamespacesToIgnore trimmed, empty
	// entries dropped); the fields below are parsed from them.
	Options

	Strategy reload.Strategy
	// Flap is the flap breaker's limits; Flap.MaxChanges 0 turns it off.
	Flap flap.Limits
	// Mode is --mode.
	Mode approval.Mode
	// GenericKinds is --generic-target-kinds.
	GenericKinds reloaderconfig.KindAllowlist
	Level        zapcore.Level
	// IgnoredSources are the source kinds of --resources-to-ignore.
	IgnoredSources map[source.Kind]bool
	// SourceLabels selects the ConfigMaps and Secrets watched; nil selects all.
	SourceLabels labels.Selector
	// NamespaceLabels selects the namespaces whose workloads reload; nil: no selector, and no
	// Namespace watch.
	NamespaceLabels labels.Selector
	// NamespaceFilter is a server-side field selector leaving out --namespaces-to-ignore; nil
	// when none is ignored.
	NamespaceFilter fields.Selector

	// V2ProbeAddr is where the probes are also served, best effort (--v2-health-addr, when
	// --health-addr is not given); empty: nowhere else.
	V2ProbeAddr string

	// OpenShift is --is-openshift: nil for auto (DeploymentConfigs watched when served),
	// else whether DeploymentConfigs were asked for.
	OpenShift *bool

	// ignoredWorkloads holds --ignored-workload-types in their plural, lower-case form.
	ignoredWorkloads map[string]bool
}

// WatchesDeploymentConfigs reports whether DeploymentConfigs are reconciled when served tells
// whether the cluster serves their API: not when --is-openshift=false or
// --ignored-workload-types leaves them out.
func (c Config) WatchesDeploymentConfigs(served bool) bool {
	return c.Reconciles(workload.DeploymentConfig(), served)
}

// IgnoresWorkload reports whether --ignored-workload-types names kind ("Deployment" matches
// deployment and deployments).
func (c Config) IgnoresWorkload(kind string) bool {
	return c.ignoredWorkloads[workloadType(c.KnownKinds(), kind)]
}

// WantsWorkload reports whether the flags leave kind k in, before the cluster is asked
// whether it serves k's API, and whether a flag asks for it (then a failure to discover the
// API stops start-up): the built-in kinds unless --ignored-workload-types names them, Argo
// Rollouts with --is-Argo-Rollouts, DeploymentConfigs unless --is-openshift=false (asked
// for with --is-openshift=true).
func (c Config) WantsWorkload(k workload.Kind) (want, asked bool) {
	if c.IgnoresWorkload(k.Name()) {
		return false, false
	}
	switch k.Describe().Gate {
	case workload.ArgoRollouts:
		return c.IsArgoRollouts, c.IsArgoRollouts
	case workload.OpenShift:
		return c.OpenShift == nil || *c.OpenShift, c.OpenShift != nil
	default:
		return true, false
	}
}

// Reconciles reports whether reloader reconciles kind k when served tells whether the
// cluster serves k's API (the built-in kinds are always served).
func (c Config) Reconciles(k workload.Kind, served bool) bool {
	want, _ := c.WantsWorkload(k)
	return want && (served || k.Describe().Gate == workload.Always)
}

// WorkloadKinds returns the kinds reloader reconciles, in the catalog's order, when served
// tells whether the cluster serves a kind's API, and the kinds whose objects it reads: those,
// and the kinds whose templates they may run (workload.Catalog.Read). internal/app watches
// these and internal/rbac grants them.
func (c Config) WorkloadKinds(served func(workload.Kind) bool) (reconciled, read []workload.Kind) {
	kinds := c.KnownKinds()
	for _, k := range kinds {
		if c.Reconciles(k, served(k)) {
			reconciled = append(reconciled, k)
		}
	}
	return reconciled, kinds.Read(reconciled)
}

// MaxRate bounds --reload-rate, --reload-burst and --first-sight-rate.
const MaxRate = 10000

// MaxWavesMinWorkloads bounds --waves-min-workloads.
const MaxWavesMinWorkloads = 100000

// Load applies the environment to o, then parses it, as cmd/reloader does: one error names
// every bad flag and variable.
func Load(o Options, getenv func(string) string) (Config, error) {
	envErr := o.ApplyEnv(getenv)
	c, err := Parse(o)
	return c, errors.Join(envErr, err)
}

// Parse checks every option and returns them parsed; the error names each bad flag or
// variable and what it accepts.
func Parse(o Options) (Config, error) {
	var errs []error
	fail := func(err error) { errs = append(errs, err) }

	c := Config{Options: o, IgnoredSources: map[source.Kind]bool{}, ignoredWorkloads: map[string]bool{}}
	var err error
	if c.Strategy, err = reload.NewStrategy(o.ReloadStrategy); err != nil {
		fail(fmt.Errorf("--reload-strategy: %w", err))
	}
	if c.Level, err = ParseLogLevel(o.LogLevel); err != nil {
		fail(err)
	}
	switch o.LogFormat {
	case "", "json", "text":
	default:
		fail(fmt.Errorf("--log-format: %q is neither json nor text", o.LogFormat))
	}

	for _, r := range o.ResourcesToIgnore {
		switch strings.ToLower(strings.TrimSpace(r)) {
		case "configmaps", "configmap":
			c.IgnoredSources[source.ConfigMap] = true
		case "secrets", "secret":
			c.IgnoredSources[source.Secret] = true
		default:
			fail(fmt.Errorf("--resources-to-ignore: %q is neither configMaps nor secrets", r))
		}
	}
	if len(c.IgnoredSources) == 2 {
		fail(errors.New("--resources-to-ignore: ignoring both configMaps and secrets leaves nothing to watch"))
	}
	for _, t := range o.IgnoredWorkloadTypes {
		if k := workloadType(o.KnownKinds(), t); k != "" {
			c.ignoredWorkloads[k] = true
		} else {
			fail(fmt.Errorf("--ignored-workload-types: %q is not one of %s (singular or plural, any case)", t, strings.Join(o.KnownKinds().Plurals(), ", ")))
		}
	}

	if c.OpenShift, err = parseOpenShift(o.IsOpenShift); err != nil {
		fail(err)
	} else if c.OpenShift != nil && *c.OpenShift && c.IgnoresWorkload("DeploymentConfig") {
		fail(errors.New("--is-openshift=true asks for DeploymentConfigs, which --ignored-workload-types leaves out; drop one of them"))
	}

	var nsErrs, ignoreErrs []error
	c.Namespaces, nsErrs = namespaceList("--namespaces", o.Namespaces)
	c.NamespacesToIgnore, ignoreErrs = namespaceList("--namespaces-to-ignore", o.NamespacesToIgnore)
	errs = append(append(errs, nsErrs...), ignoreErrs...)
	c.NamespaceFilter = namespaceFilter(c.NamespacesToIgnore)
	if c.NamespaceLabels, err = ParseSelector(o.NamespaceSelector); err != nil {
		fail(fmt.Errorf("--namespace-selector: %w", err))
	}
	if c.SourceLabels, err = ParseSelector(o.ResourceLabelSelector); err != nil {
		fail(fmt.Errorf("--resource-label-selector: %w", err))
	}
	errs = append(errs, checkKeys(o.Keys)...)

	if o.CoalesceWindow < 0 {
		fail(fmt.Errorf("--coalesce-window: %v is negative; want 0 (off) or a duration such as 300ms", o.CoalesceWindow))
	}
	if o.ReloadRate < 0 || o.ReloadRate > MaxRate || math.IsNaN(o.ReloadRate) {
		fail(fmt.Errorf("--reload-rate: %v is not a rate from 0 (off) to %d reloads per second", o.ReloadRate, MaxRate))
	}
	if o.ReloadBurst < 1 || o.ReloadBurst > MaxRate {
		fail(fmt.Errorf("--reload-burst: %d is not from 1 to %d", o.ReloadBurst, MaxRate))
	}
	if o.FirstSightRate < 0 || o.FirstSightRate > MaxRate || math.IsNaN(o.FirstSightRate) {
		fail(fmt.Errorf("--first-sight-rate: %v is not a rate from 0 (off) to %d records per second", o.FirstSightRate, MaxRate))
	}
	if o.MinReloadInterval < 0 || o.MinReloadInterval > reload.MaxMinReloadInterval {
		fail(fmt.Errorf("--min-reload-interval: %v is not a duration from 0 (off) to 168h, such as 10m", o.MinReloadInterval))
	}
	c.Flap = flap.Limits{MaxChanges: o.FlapMaxChanges, Window: o.FlapWindow, Quiet: o.FlapQuiet}
	if err := c.Flap.Validate(); err != nil {
		fail(fmt.Errorf("--flap-max-changes, --flap-window, --flap-quiet: %w", err))
	}
	if c.GenericKinds, err = reloaderconfig.ParseKindAllowlist(o.GenericTargetKinds); err != nil {
		fail(fmt.Errorf("--generic-target-kinds: %w", err))
	}
	if m, err := approval.ParseMode(o.Mode); err != nil {
		fail(fmt.Errorf("--mode: %w", err))
	} else {
		c.Mode = m
	}
	if o.WavesMinWorkloads < 0 || o.WavesMinWorkloads > MaxWavesMinWorkloads {
		fail(fmt.Errorf("--waves-min-workloads: %d is not from 0 (off) to %d", o.WavesMinWorkloads, MaxWavesMinWorkloads))
	}
	if o.RolloutDeadline <= 0 || o.RolloutDeadline > 24*time.Hour {
		fail(fmt.Errorf("--rollout-deadline: %v is not a positive duration up to 24h, such as 10m", o.RolloutDeadline))
	}
	errs = append(errs, checkClientRate(o.KubeAPIQPS, o.KubeAPIBurst)...)
	if o.Workers < 1 {
		fail(fmt.Errorf("--workers: %d is less than 1", o.Workers))
	}
	if o.ReconcileTimeout <= 0 {
		fail(fmt.Errorf("--reconcile-timeout: %v is not a positive duration such as 2m", o.ReconcileTimeout))
	}
	if err := checkAddr(o.MetricsAddr); err != nil {
		fail(fmt.Errorf("--metrics-addr: %w; 0 turns it off", err))
	}
	if o.MetricsSecure && c.HealthAddr == "" {
		c.HealthAddr = DefaultSecureHealthAddr
	}
	if c.HealthAddr != "" {
		if err := checkAddr(c.HealthAddr); err != nil {
			fail(fmt.Errorf("--health-addr: %w; 0 turns the probes off", err))
		}
	}
	if a := o.V2HealthAddr; a != "" && a != "0" {
		if err := checkAddr(a); err != nil {
			fail(fmt.Errorf("--v2-health-addr: %w; 0 turns it off", err))
		} else if o.HealthAddr == "" && !portTaken(a, o) {
			c.V2ProbeAddr = a
		}
	}
	errs = append(errs, checkPlanWebhook(o)...)
	if o.EnablePprof {
		if err := checkAddr(o.PprofAddr); err != nil {
			fail(fmt.Errorf("--pprof-addr: %w", err))
		}
	}

	// The webhook settings serve --webhook-url and the ALERT_* alerts alike.
	if o.WebhookURL != "" {
		if err := checkURL(o.WebhookURL); err != nil {
			fail(fmt.Errorf("--webhook-url: %w", err))
		}
	}
	if o.WebhookRetries < 1 {
		fail(fmt.Errorf("--webhook-retries: %d is less than 1 (the first attempt counts)", o.WebhookRetries))
	}
	if o.WebhookTimeout <= 0 {
		fail(fmt.Errorf("--webhook-timeout: %v is not a positive duration such as 10s", o.WebhookTimeout))
	}
	errs = append(errs, checkLease(o)...)
	if c.Alert.Sink == "" {
		c.Alert.Sink = "raw"
	}
	errs = append(errs, checkAlert(c.Alert)...)

	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	c.Warnings = append(slices.Clone(o.Warnings), cleartextWarnings(c.Options)...)
	c.Warnings = append(c.Warnings, alertWarnings(c.Alert)...)
	return c, nil
}

// cleartextWarnings warns of webhook and alert URLs without TLS: their paths are tokens that
// anyone on the way can read. A warning, not a refusal: an in-cluster relay over http is a
// fair choice. Only the scheme and host are shown.
func cleartextWarnings(o Options) []string {
	urls := map[string]string{"--webhook-url": o.WebhookURL}
	if o.Alert.Enabled {
		urls[o.Alert.alertName(alertWebhookURL)] = o.Alert.WebhookURL
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(urls)) {
		if u, err := url.Parse(urls[name]); err == nil && u.Scheme == "http" {
			out = append(out, fmt.Sprintf("%s: http://%s is not TLS; the URL, token included, crosses the network in clear (use https)", name, u.Host))
		}
	}
	return out
}

// namespaceList trims each entry, drops empty ones ("a,,b" or a trailing comma: an empty
// name would mean every namespace to the cache) and checks that the rest are namespace names.
func namespaceList(flag string, in []string) ([]string, []error) {
	var out []string
	var errs []error
	for _, ns := range in {
		ns = strings.TrimSpace(ns)
		if ns == "" {
			continue
		}
		if err := checkNamespace(ns); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", flag, err))
			continue
		}
		out = append(out, ns)
	}
	return out, errs
}

// checkNamespace accepts a namespace name: a DNS label (lower-case, at most 63 characters).
func checkNamespace(ns string) error {
	if problems := validation.IsDNS1123Label(ns); len(problems) > 0 {
		return fmt.Errorf("%q is not a namespace name: %s", ns, strings.Join(problems, "; "))
	}
	return nil
}

// namespaceFilter returns a field selector that leaves out namespaces, or nil.
func namespaceFilter(namespaces []string) fields.Selector {
	if len(namespaces) == 0 {
		return nil
	}
	sels := make([]fields.Selector, 0, len(namespaces))
	for _, ns := range namespaces {
		sels = append(sels, fields.OneTermNotEqualSelector("metadata.namespace", ns))
	}
	return fields.AndSelectors(sels...)
}

// checkKeys refuses an annotation flag whose value is no annotation key: such a key could
// never be found on an object, so its rule would silently never apply.
func checkKeys(k reload.Keys) []error {
	flags := map[string]string{
		"--auto-annotation":                  k.Auto,
		"--auto-search-annotation":           k.Search,
		"--search-match-annotation":          k.Match,
		"--ignore-annotation":                k.Ignore,
		"--pause-deployment-annotation":      k.PausePeriod,
		"--pause-deployment-time-annotation": k.PausedAt,
		"--rollout-strategy-annotation":      k.RolloutStrategy,
	}
	for _, kind := range source.Kinds {
		flags["--"+string(kind)+"-annotation"] = k.Reload[kind]
		flags["--"+string(kind)+"-auto-annotation"] = k.TypedAuto[kind]
		flags["--"+string(kind)+"-exclude-annotation"] = k.Exclude[kind]
	}
	var errs []error
	for _, flag := range slices.Sorted(maps.Keys(flags)) {
		if problems := validation.IsQualifiedName(flags[flag]); len(problems) > 0 {
			errs = append(errs, fmt.Errorf("%s: %q is not an annotation key (such as example.com/name): %s",
				flag, flags[flag], strings.Join(problems, "; ")))
		}
	}
	return errs
}

// maxKubeAPIQPS bounds --kube-api-qps: beyond it, reloader would rather hurt its API server
// than be held back by it.
const maxKubeAPIQPS = 10000

// checkClientRate checks --kube-api-qps and --kube-api-burst as client-go's token bucket
// needs them: a positive rate, and a burst that holds at least one second of it.
func checkClientRate(qps float64, burst int) []error {
	var errs []error
	if !(qps > 0 && qps <= maxKubeAPIQPS) { // also false for NaN
		errs = append(errs, fmt.Errorf("--kube-api-qps: %v is not a rate above 0 and up to %d requests per second, such as 200", qps, maxKubeAPIQPS))
	} else if float64(burst) < qps {
		errs = append(errs, fmt.Errorf("--kube-api-burst: %d is below --kube-api-qps (%v); want at least the QPS, such as 1000", burst, qps))
	}
	return errs
}

// parseOpenShift reads --is-openshift: auto (or empty, as upstream's v2 takes it), or a
// boolean.
func parseOpenShift(v string) (*bool, error) {
	switch s := strings.ToLower(strings.TrimSpace(v)); s {
	case "", OpenShiftAuto:
		return nil, nil
	default:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, fmt.Errorf("--is-openshift: %q is not auto, true or false", v)
		}
		return &b, nil
	}
}

// leaseJitter is client-go's leaderelection.JitterFactor: a leader's renewals come up to
// 1.2 retry periods apart, so the renew deadline must exceed that or client-go refuses to
// start (and controller-runtime's manager with it).
const leaseJitter = 1.2

// maxLeaseDuration is the longest lease the Lease object can hold (int32 seconds).
const maxLeaseDuration = math.MaxInt32 * time.Second

// checkLease checks the --enable-ha (and --shards) timings as upstream does and as client-go's
// leader election needs them. They are checked without --enable-ha too: a bad value is a
// mistake whether used yet or not.
func checkLease(o Options) []error {
	var errs []error
	fail := func(flag, format string, args ...any) {
		errs = append(errs, fmt.Errorf("--leader-election-"+flag+": "+format, args...))
	}
	if problems := validation.IsDNS1123Subdomain(o.LeaderElectionID); len(problems) > 0 {
		fail("id", "%q is not a Lease name: %s", o.LeaderElectionID, strings.Join(problems, "; "))
	}
	if ns := o.LeaderElectionNamespace; ns != "" {
		if err := checkNamespace(ns); err != nil {
			fail("namespace", "%w", err)
		}
	}
	switch d := o.LeaseDuration; {
	case d < time.Second:
		fail("lease-duration", "%v is less than 1s", d)
	case d%time.Second != 0:
		// The Lease records whole seconds: a follower would read a shorter lease than the
		// leader renews on, and could take over while the leader still leads.
		fail("lease-duration", "%v is not a whole number of seconds (the Lease records seconds), such as 15s", d)
	case d > maxLeaseDuration:
		fail("lease-duration", "%v is longer than the Lease can record (%v)", d, maxLeaseDuration)
	}
	if o.LeaseRetryPeriod <= 0 {
		fail("retry-period", "%v is not a positive duration such as 2s", o.LeaseRetryPeriod)
	}
	if o.LeaseRenewDeadline <= 0 {
		fail("renew-deadline", "%v is not a positive duration such as 10s", o.LeaseRenewDeadline)
	} else if o.LeaseRetryPeriod > 0 && float64(o.LeaseRenewDeadline) <= leaseJitter*float64(o.LeaseRetryPeriod) {
		fail("renew-deadline", "%v must be longer than 1.2 × --leader-election-retry-period (%v), client-go's jitter of renewals",
			o.LeaseRenewDeadline, o.LeaseRetryPeriod)
	}
	if o.LeaseDuration <= o.LeaseRenewDeadline {
		fail("lease-duration", "%v must be longer than --leader-election-renew-deadline (%v)", o.LeaseDuration, o.LeaseRenewDeadline)
	}
	return append(errs, checkShards(o)...)
}

// checkShards checks --shards and its Lease names. Sharding replaces the single leader of
// --enable-ha: each replica leads its own shards.
func checkShards(o Options) []error {
	var errs []error
	if o.Shards < 0 || o.Shards > shard.MaxShards {
		errs = append(errs, fmt.Errorf("--shards: %d is not a number of shards from 0 (off) to %d", o.Shards, shard.MaxShards))
	}
	if o.Shards > 1 && o.EnableHA {
		errs = append(errs, errors.New("--shards: sharding and --enable-ha exclude each other: with --shards every replica reloads its own namespaces, no single leader is elected"))
	}
	if o.Shards > 1 && o.WebhookURL != "" {
		errs = append(errs, errors.New("--shards: not with --webhook-url: a notifier keeps what it has seen in memory, which a hand-over of namespaces would lose"))
	}
	if problems := validation.IsValidLabelValue(o.ShardLeasePrefix); len(problems) > 0 {
		errs = append(errs, fmt.Errorf("--shard-lease-prefix: %q is no label value (the Leases are labelled with it): %s", o.ShardLeasePrefix, strings.Join(problems, "; ")))
	}
	// The longest name made from the prefix is a member Lease's.
	if problems := validation.IsDNS1123Subdomain(o.ShardLeasePrefix + "-member-0123456789abcdef"); len(problems) > 0 {
		errs = append(errs, fmt.Errorf("--shard-lease-prefix: %q does not make Lease names: %s", o.ShardLeasePrefix, strings.Join(problems, "; ")))
	}
	return errs
}

// checkURL accepts absolute http and https URLs. Its errors name the scheme and host only:
// the path of a Slack or Teams URL is a token.
func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return errors.New("not a URL; want http(s)://host/path")
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("scheme %q, host %q: want an http(s)://host/path URL", u.Scheme, u.Host)
	}
	return nil
}

// portTaken reports whether another address reloader listens on (--metrics-addr, --pprof-addr,
// --plan-webhook-addr) has addr's port: the best-effort --v2-health-addr, bound first, would
// take it from them. With --metrics-addr on it, the probes are there already.
func portTaken(addr string, o Options) bool {
	_, port, err := net.SplitHostPort(addr)
	if err != nil || port == "0" {
		return false
	}
	others := []string{o.MetricsAddr, o.PlanWebhookAddr}
	if o.EnablePprof {
		others = append(others, o.PprofAddr)
	}
	for _, other := range others {
		if _, p, err := net.SplitHostPort(other); err == nil && p == port {
			return true
		}
	}
	return false
}

// checkAddr accepts a listen address as net.Listen (and so controller-runtime, which serves
// upstream's v2 --metrics-addr and --health-addr) takes it: host:port, the port a number
// (":9090", "0.0.0.0:9090", "[::]:9090") or a service name (":http").
func checkAddr(addr string) error {
	if addr == "0" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		if p, perr := strconv.Atoi(port); perr == nil {
			if p < 0 || p > 65535 {
				err = fmt.Errorf("port %q is not a number from 0 to 65535", port)
			}
		} else if _, lerr := net.LookupPort("tcp", port); lerr != nil {
			err = fmt.Errorf("port %q is not a number from 0 to 65535 nor a known service name", port)
		}
	}
	if err != nil {
		return fmt.Errorf("%q is not a listen address such as :9090 (%w)", addr, err)
	}
	return nil
}
