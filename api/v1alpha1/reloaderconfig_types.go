package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Limits of a spec, enforced by the API server's schema so that no ReloaderConfig costs
// reloader more than a bounded amount of memory and work.
const (
	MaxTargets = 64
	MaxSources = 64
	MaxKeys    = 64
	// MaxStatusEntries bounds each list of the status; counts give the totals.
	MaxStatusEntries = 256
)

// ReloaderConfig declares reload rules for workloads of its namespace: which workloads
// (targets) roll when which ConfigMaps or Secrets (sources) change, and how. Its rules add to
// the workloads' annotations; a workload chosen by both still rolls once per change.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rlc,categories=reloader
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Targets",type=integer,JSONPath=`.status.targetCount`
// +kubebuilder:printcolumn:name="Sources",type=integer,JSONPath=`.status.sourceCount`
// +kubebuilder:printcolumn:name="Held",type=integer,JSONPath=`.status.heldCount`
// +kubebuilder:printcolumn:name="Last Reload",type=date,JSONPath=`.status.lastReloadTime`
// +kubebuilder:printcolumn:name="Reason",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Generic Targets",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="GenericTargetsAccessible")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ReloaderConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ReloaderConfigSpec   `json:"spec"`
	Status ReloaderConfigStatus `json:"status,omitempty"`
}

// ReloaderConfigSpec is what to reload, on which changes, and how.
//
// +kubebuilder:validation:XValidation:rule="(has(self.targets) && size(self.targets) > 0) || (has(self.genericTargets) && size(self.genericTargets) > 0)",message="spec.targets or spec.genericTargets needs at least one entry"
type ReloaderConfigSpec struct {
	// Targets are the workloads of this namespace that these rules reload.
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +optional
	Targets []Target `json:"targets,omitempty"`

	// Sources are the ConfigMaps and Secrets of this namespace whose changes reload the targets.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	Sources []Source `json:"sources"`

	// Strategy overrides --reload-strategy for the targets: env-vars or annotations.
	// +kubebuilder:validation:Enum=env-vars;annotations
	// +optional
	Strategy string `json:"strategy,omitempty"`

	// PausePeriod pauses a reloaded Deployment for this long (as the pause-period annotation does).
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('168h')",message="pausePeriod must be a duration between 0s and 168h, like 5m or 1h30m"
	// +optional
	PausePeriod *metav1.Duration `json:"pausePeriod,omitempty"`

	// CoalesceWindow overrides --coalesce-window for the targets: changes within it roll once.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('1h')",message="coalesceWindow must be a duration between 0s and 1h, like 2s"
	// +optional
	CoalesceWindow *metav1.Duration `json:"coalesceWindow,omitempty"`

	// MinReloadInterval overrides --min-reload-interval for the targets: a reload comes at
	// least this long after the last one (a target's min-reload-interval annotation wins).
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('168h')",message="minReloadInterval must be a duration between 0s and 168h, like 10m"
	// +optional
	MinReloadInterval *metav1.Duration `json:"minReloadInterval,omitempty"`

	// ReloadWindow holds the targets' reloads outside these maintenance windows, in the form
	// of the reload-window annotation ("Mon-Fri 02:00-04:00 Europe/Berlin; Sat,Sun 22:00-02:00 UTC");
	// a target's own annotation wins.
	// +kubebuilder:validation:MaxLength=512
	// +optional
	ReloadWindow string `json:"reloadWindow,omitempty"`

	// Mode overrides --mode for the targets: reload rolls them, notify only reports what would
	// reload (nothing restarts, the new hashes are recorded), approve holds each reload until
	// `kubectl reloader approve` names its content. The reloader.dev/mode annotation of a
	// target, or of a changed ConfigMap or Secret, wins.
	// +kubebuilder:validation:Enum=reload;notify;approve
	// +optional
	Mode string `json:"mode,omitempty"`

	// Waves rolls the targets in health-gated waves when a source changes: a canary, then
	// growing waves, each once the one before completed its rollout; a stalled rollout halts
	// the rest. As the reloader.dev/waves annotation on a source does, for these targets.
	// +optional
	Waves *bool `json:"waves,omitempty"`

	// RunCronJobsOnReload overrides --run-cronjobs-on-reload for CronJob targets.
	// +optional
	RunCronJobsOnReload *bool `json:"runCronJobsOnReload,omitempty"`

	// RecreateFinishedJobs overrides --recreate-finished-jobs for Job targets.
	// +optional
	RecreateFinishedJobs *bool `json:"recreateFinishedJobs,omitempty"`

	// GenericTargets are objects of any kind holding a pod template at a path (an operator's
	// custom resource): reloader patches the template's annotation when a source chosen by
	// name in sources changes. Reloader's ServiceAccount needs get and patch on their kind.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	GenericTargets []GenericTarget `json:"genericTargets,omitempty"`
}

// MaxOwnerDepth bounds the ownerReferences followed from a generic target's ownerOf.
const MaxOwnerDepth = 5

// WorkloadRef names one workload of the config's namespace.
type WorkloadRef struct {
	// Kind of the workload.
	// +kubebuilder:validation:Enum=Deployment;StatefulSet;DaemonSet
	Kind string `json:"kind"`

	// Name of the workload.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	Name string `json:"name"`
}

// Bounds of a generic target's templatePath.
const (
	MaxTemplatePathSegments = 10
	MaxTemplatePathLength   = 256
)

// GenericTarget is one object of any kind whose pod template lies at templatePath: by name,
// or as the top-level owner of a workload (ownerOf).
//
// +kubebuilder:validation:XValidation:rule="(has(self.name) ? 1 : 0) + (has(self.ownerOf) ? 1 : 0) == 1",message="a generic target has exactly one of name and ownerOf"
type GenericTarget struct {
	// APIVersion of the object, "group/version" (or "v1").
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?v[0-9]+((alpha|beta)[0-9]+)?$`
	APIVersion string `json:"apiVersion"`

	// Kind of the object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Z][A-Za-z0-9]*$`
	Kind string `json:"kind"`

	// Name of the object, in the config's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +optional
	Name string `json:"name,omitempty"`

	// OwnerOf chooses the object as the top-level owner of this workload: reloader follows
	// controller ownerReferences up (at most 5) and patches the last, which must be of
	// apiVersion and kind.
	// +optional
	OwnerOf *WorkloadRef `json:"ownerOf,omitempty"`

	// TemplatePath is the dotted path of the PodTemplateSpec in the object, like
	// spec.deployment.spec.template: at most 10 field names.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62}){0,9}$`
	TemplatePath string `json:"templatePath"`
}

// Bounds of a label selector: each one is compiled and matched on every event it concerns.
// Reloader checks them again when it compiles a config, for configs stored under a CRD that
// did not have them yet (Helm never upgrades a chart's CRDs).
const (
	MaxMatchLabels      = 32
	MaxMatchExpressions = 16
	MaxSelectorValues   = 64
	// A label key is a prefix (253) / name (63); a value at most 63.
	MaxLabelKeyLength   = 317
	MaxLabelValueLength = 63
)

// LabelSelector is metav1.LabelSelector, same fields, with bounds, and never empty: an empty
// selector would choose everything by accident (a template's leftover {}), so choosing
// everything is said with all: true on the target or source instead.
//
// +kubebuilder:validation:XValidation:rule="(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",message="an empty selector would choose everything: give matchLabels or matchExpressions, or set all: true instead of selector to choose every one"
type LabelSelector struct {
	// MatchLabels chooses objects with all these labels.
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317 && size(self[k]) <= 63)",message="a label key has at most 317 characters (prefix/name) and a value at most 63"
	// +optional
	MatchLabels map[string]string `json:"matchLabels,omitempty"`

	// MatchExpressions are requirements on labels, all of which must hold.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	MatchExpressions []LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// LabelSelectorRequirement is metav1.LabelSelectorRequirement, bounded.
type LabelSelectorRequirement struct {
	// Key is the label key.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	Key string `json:"key"`

	// Operator is In, NotIn, Exists or DoesNotExist.
	// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist
	Operator metav1.LabelSelectorOperator `json:"operator"`

	// Values for In and NotIn (at least one); none for Exists and DoesNotExist.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=atomic
	// +optional
	Values []string `json:"values,omitempty"`
}

// Meta returns the selector as metav1's, for labels.Selector; nil for nil.
func (s *LabelSelector) Meta() *metav1.LabelSelector {
	if s == nil {
		return nil
	}
	m := &metav1.LabelSelector{MatchLabels: s.MatchLabels}
	for _, e := range s.MatchExpressions {
		m.MatchExpressions = append(m.MatchExpressions, metav1.LabelSelectorRequirement{Key: e.Key, Operator: e.Operator, Values: e.Values})
	}
	return m
}

// Target chooses workloads of one kind, by name, by label selector, or all of them.
//
// +kubebuilder:validation:XValidation:rule="(has(self.name) ? 1 : 0) + (has(self.selector) ? 1 : 0) + (has(self.all) && self.all ? 1 : 0) == 1",message="a target has exactly one of name, selector and all: true"
type Target struct {
	// Kind of the workloads.
	// +kubebuilder:validation:Enum=Deployment;StatefulSet;DaemonSet;CronJob;Job;Rollout;DeploymentConfig
	Kind string `json:"kind"`

	// Name of one workload.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +optional
	Name string `json:"name,omitempty"`

	// Selector chooses the workloads whose labels match.
	// +optional
	Selector *LabelSelector `json:"selector,omitempty"`

	// All chooses every workload of this kind in the namespace.
	// +optional
	All bool `json:"all,omitempty"`

	// After orders these workloads in health-gated waves, as the reloader.dev/after
	// annotation does: each rolls only once the workloads named ("deployment/db") completed
	// their rollout for the same change.
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=300
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z]+/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +listType=atomic
	// +optional
	After []string `json:"after,omitempty"`
}

// Source chooses ConfigMaps or Secrets: by name, by label selector, auto (every one of the
// kind that a target's pod template references), or all (every one of the kind).
//
// +kubebuilder:validation:XValidation:rule="(has(self.name) ? 1 : 0) + (has(self.selector) ? 1 : 0) + (has(self.auto) && self.auto ? 1 : 0) + (has(self.all) && self.all ? 1 : 0) == 1",message="a source has exactly one of name, selector, auto: true and all: true"
// +kubebuilder:validation:XValidation:rule="!(has(self.keys) && has(self.autoKeys) && self.autoKeys)",message="keys and autoKeys: true exclude each other"
type Source struct {
	// Kind of the sources.
	// +kubebuilder:validation:Enum=ConfigMap;Secret
	Kind string `json:"kind"`

	// Name of one source.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +optional
	Name string `json:"name,omitempty"`

	// Selector chooses the sources whose labels match.
	// +optional
	Selector *LabelSelector `json:"selector,omitempty"`

	// Auto chooses every source of this kind that a target references.
	// +optional
	Auto bool `json:"auto,omitempty"`

	// All chooses every source of this kind in the namespace.
	// +optional
	All bool `json:"all,omitempty"`

	// Keys, when set, limit the reload to changes of these keys; other keys change nothing.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[-._a-zA-Z0-9]+$`
	// +listType=set
	// +optional
	Keys []string `json:"keys,omitempty"`

	// AutoKeys limits the reload to the keys each target's pod spec reads (valueFrom key
	// references and volume items); a source used whole counts whole.
	// +optional
	AutoKeys bool `json:"autoKeys,omitempty"`
}

// Condition types and reasons of the status.
const (
	ConditionReady    = "Ready"
	ConditionDegraded = "Degraded"

	ReasonResolved         = "Resolved"
	ReasonSourceMissing    = "SourceMissing"
	ReasonTargetMissing    = "TargetMissing"
	ReasonSelectorNoMatch  = "SelectorMatchesNothing"
	ReasonKeyMissing       = "KeyMissing"
	ReasonInvalidSpec      = "InvalidSpec"
	ReasonKindNotWatched   = "KindNotWatched"
	ReasonRolloutStalled   = "RolloutStalled"
	ReasonConflictingRules = "ConflictingRules"
	// ReasonLimitExceeded: the namespace's configs exceed reloader's per-namespace limits
	// and this one is left out.
	ReasonLimitExceeded = "LimitExceeded"

	// ConditionGenericTargets is False while a generic target is refused (its kind) or reloader
	// may not get or patch it.
	ConditionGenericTargets = "GenericTargetsAccessible"
	ReasonAccessDenied      = "AccessDenied"
	ReasonAccessGranted     = "AccessGranted"
	// ReasonTargetRefused: a generic target is of a kind --generic-target-kinds does not
	// allow, or of a cluster-scoped kind; it is never written.
	ReasonTargetRefused = "TargetRefused"
)

// ReloaderConfigStatus is what reloader sees of the rules now.
type ReloaderConfigStatus struct {
	// ObservedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready (every target and source resolved) and Degraded (what to fix).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// TargetCount and SourceCount are how many workloads and sources the rules resolve to now
	// (written even when 0, so that kubectl's columns show it).
	// +optional
	TargetCount int32 `json:"targetCount"`
	// +optional
	SourceCount int32 `json:"sourceCount"`
	// HeldCount is how many targets have a reload due that something holds (targets[].held):
	// pacing, a quarantined source, a wave, an approval.
	// +optional
	HeldCount int32 `json:"heldCount"`

	// LastReloadTime is the latest reload of any target by these rules.
	// +optional
	LastReloadTime *metav1.Time `json:"lastReloadTime,omitempty"`

	// Sources are the watched sources and their current content hash (at most 256).
	// +kubebuilder:validation:MaxItems=256
	// +listType=atomic
	// +optional
	Sources []SourceStatus `json:"sources,omitempty"`

	// Targets are the resolved workloads and their last reload (at most 256).
	// +kubebuilder:validation:MaxItems=256
	// +listType=atomic
	// +optional
	Targets []TargetStatus `json:"targets,omitempty"`
}

// SourceStatus is one watched source.
type SourceStatus struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Hash is the content hash reloader compares (of the chosen keys, when keys are set).
	// +optional
	Hash string `json:"hash,omitempty"`
	// Keys limits the hash, when set.
	// +optional
	Keys []string `json:"keys,omitempty"`
}

// TargetStatus is one resolved workload.
type TargetStatus struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// LastReload is the latest reload of this workload by these rules.
	// +optional
	LastReload *Reload `json:"lastReload,omitempty"`
	// PausedUntil is set while a pause period holds the workload's rollout.
	// +optional
	PausedUntil *metav1.Time `json:"pausedUntil,omitempty"`
	// Held is set while a reload of the workload is due and held.
	// +optional
	Held *Held `json:"held,omitempty"`
}

// Held is what holds a due reload, as `reloader explain` says it.
type Held struct {
	// Reason is the kind of hold: min-interval, reload-window, rate-limit, quarantined,
	// wave, approval, ...
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason"`
	// Message says what holds it and what ends the hold.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`
}

// Reload is one reload and how its rollout went.
type Reload struct {
	Time metav1.Time `json:"time"`
	// Source is the changed source, "configmap/name" or "secret/name".
	Source string `json:"source"`
	Hash   string `json:"hash"`
	// Rollout is Progressing, Complete or Stalled; empty when the kind has no rollout.
	// +optional
	Rollout string `json:"rollout,omitempty"`
	// RolloutReason says why a rollout stalled.
	// +optional
	RolloutReason string `json:"rolloutReason,omitempty"`
}

// ReloaderConfigList is a list of ReloaderConfigs.
//
// +kubebuilder:object:root=true
type ReloaderConfigList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ReloaderConfig `json:"items"`
}
