{{/* The chart's name, as used in labels: nameOverride, else the chart's. */}}
{{- define "reloader.name" -}}
{{- default .Chart.Name .Values.nameOverride | lower | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The release's full name, the name of its Deployment and the prefix of every other object:
fullnameOverride, else "<release>-<name>" whatever the release is called, as upstream's chart
names it, so that `helm upgrade` of an upstream release finds and replaces its objects.
*/}}
{{- define "reloader.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "reloader.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The namespace of the chart's namespaced objects: the value namespace, else the release's. */}}
{{- define "reloader.namespace" -}}
{{- .Values.namespace | default .Release.Namespace -}}
{{- end -}}

{{/*
A map of the values, passed through tpl, each value a string, as YAML ("{}" when empty).
Called with (list $ map).
*/}}
{{- define "reloader.tplMap" -}}
{{- $ctx := index . 0 -}}
{{- $out := dict -}}
{{- with index . 1 -}}
{{- range $k, $v := tpl (toYaml .) $ctx | fromYaml }}{{ $_ := set $out $k (toString $v) }}{{ end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/*
Labels that select the pods, upstream's: a Deployment's selector can't change, so an upgrade
of an upstream release keeps it exactly: app, release and every reloader.matchLabels entry.
*/}}
{{- define "reloader.selectorLabels" -}}
{{- $l := include "reloader.tplMap" (list . .Values.reloader.matchLabels) | fromYaml -}}
{{- $_ := set $l "app" (include "reloader.fullname" .) -}}
{{- $_ := set $l "release" .Release.Name -}}
{{- toYaml $l -}}
{{- end -}}

{{/* Labels of every object: the selector's and upstream's chart labels. */}}
{{- define "reloader.labels" -}}
{{- $l := include "reloader.selectorLabels" . | fromYaml -}}
{{- $chart := printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" -}}
{{- $_ := set $l "app.kubernetes.io/name" (include "reloader.name" .) -}}
{{- $_ := set $l "app.kubernetes.io/instance" .Release.Name -}}
{{- $_ := set $l "app.kubernetes.io/version" (.Chart.AppVersion | toString) -}}
{{- $_ := set $l "app.kubernetes.io/managed-by" .Release.Service -}}
{{- $_ := set $l "heritage" .Release.Service -}}
{{- $_ := set $l "helm.sh/chart" $chart -}}
{{- $_ := set $l "chart" $chart -}}
{{- toYaml $l -}}
{{- end -}}

{{/*
The chart's labels plus extra ones (a map of values, through tpl); the chart's win a clash.
Called with (list $ map).
*/}}
{{- define "reloader.labelsWith" -}}
{{- $ctx := index . 0 -}}
{{- $extra := include "reloader.tplMap" . | fromYaml -}}
{{- toYaml (merge (include "reloader.labels" $ctx | fromYaml) $extra) -}}
{{- end -}}

{{- define "reloader.serviceAccountName" -}}
{{- if .Values.reloader.serviceAccount.create -}}
{{- default (include "reloader.fullname" .) .Values.reloader.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.reloader.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
The image, as upstream's chart computes it: with global.imageRegistry,
<registry>/<image.name>:<tag>; else <image.repository>@<digest>, or <image.repository>:<tag>.
Upstream's older keys reloader.deployment.image.{name,tag} stand for name (or repository)
and tag when set. An empty tag is the chart's appVersion, in both charts; so upstream's own
repository (or name) with no tag, as upstream chart 3's values file has it, means "the image
this chart ships", which is reloader's ("reloader.upstreamImageUnpinned").
*/}}
{{- define "reloader.image" -}}
{{- $old := .Values.reloader.deployment.image | default dict -}}
{{- $unpinned := include "reloader.upstreamImageUnpinned" . -}}
{{- $tag := $old.tag | default .Values.image.tag | default .Chart.AppVersion | toString -}}
{{- with .Values.global.imageRegistry -}}
{{- $name := ternary "reloader-operator/reloader" ($old.name | default $.Values.image.name) (eq $unpinned "name") -}}
{{- printf "%s/%s:%s" (trimSuffix "/" .) $name $tag -}}
{{- else -}}
{{- $repo := ternary "ghcr.io/reloader-operator/reloader" ($old.name | default .Values.image.repository) (eq $unpinned "repository") -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repo .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo $tag -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
"repository" (or "name" under global.imageRegistry) when the values name upstream's image
(ghcr.io/stakater/reloader, or stakater/reloader) with neither tag nor digest; else empty.
The defaults of upstream's chart 3 do (its tag defaults to its own appVersion): rendered as
is, that would be stakater's image at reloader's version, which does not exist.
*/}}
{{- define "reloader.upstreamImageUnpinned" -}}
{{- $old := .Values.reloader.deployment.image | default dict -}}
{{- if not (or $old.tag .Values.image.tag .Values.image.digest) -}}
{{- if .Values.global.imageRegistry -}}
{{- if eq ($old.name | default .Values.image.name) "stakater/reloader" }}name{{ end -}}
{{- else if eq ($old.name | default .Values.image.repository) "ghcr.io/stakater/reloader" }}repository{{ end -}}
{{- end -}}
{{- end -}}

{{/*
Upstream chart 3's Reloader Enterprise values that would act upstream (its commercial
subchart renders only with enterprise.enabled; global.host names its console's address),
as a JSON list of keys: this chart installs no such component and ignores them.
*/}}
{{- define "reloader.ignoredEnterpriseValues" -}}
{{- $keys := list -}}
{{- $e := .Values.enterprise | default dict -}}
{{- $g := .Values.global | default dict -}}
{{- if $e.enabled }}{{ $keys = append $keys "enterprise.enabled" }}{{ end -}}
{{- if $g.host }}{{ $keys = append $keys "global.host" }}{{ end -}}
{{- if $keys -}}
{{- range $k := list "ingressScheme" "gatewayBasePath" }}{{ if get $g $k }}{{ $keys = append $keys (printf "global.%s" $k) }}{{ end }}{{ end -}}
{{- end -}}
{{- toJson $keys -}}
{{- end -}}

{{/* global.imagePullSecrets and deployment.imagePullSecrets, as [{name: ...}]. */}}
{{- define "reloader.imagePullSecrets" -}}
{{- $out := list -}}
{{- range (concat .Values.global.imagePullSecrets .Values.reloader.deployment.imagePullSecrets) -}}
{{- if kindIs "string" . }}{{ $out = append $out (dict "name" .) }}{{ else }}{{ $out = append $out . }}{{ end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/*
The namespaces reloader watches, as a JSON list: with reloader.namespaces (a list or a
comma-separated string), those and the release's own, deduplicated and sorted, as upstream's
chart passes them; else the release namespace when watchGlobally is false; else none (all
namespaces, a cluster-wide install).
*/}}
{{- define "reloader.watchedNamespaces" -}}
{{- $own := include "reloader.namespace" . -}}
{{- $ns := .Values.reloader.namespaces | default list -}}
{{- if kindIs "string" $ns }}{{ $ns = splitList "," $ns }}{{ end -}}
{{- $out := list -}}
{{- range $ns }}{{ $t := toString . | trim }}{{ if $t }}{{ $out = append $out $t }}{{ end }}{{ end -}}
{{- if $out }}{{ $out = append $out $own }}{{ else if not .Values.reloader.watchGlobally }}{{ $out = list $own }}{{ end -}}
{{- toJson ($out | uniq | sortAlpha) -}}
{{- end -}}

{{/* "true" when reloader watches every namespace (no Role per namespace), else "". */}}
{{- define "reloader.global" -}}
{{- if not (include "reloader.watchedNamespaces" . | fromJsonArray) }}true{{ end -}}
{{- end -}}

{{/*
reloader.namespaceSelector, passed only to a cluster-wide install (watchGlobally true and no
namespaces), as upstream's chart does: a namespaced install needs no namespace list.
*/}}
{{- define "reloader.namespaceSelector" -}}
{{- if and .Values.reloader.watchGlobally (include "reloader.global" .) }}{{ .Values.reloader.namespaceSelector }}{{ end -}}
{{- end -}}

{{/*
"true" when Jobs are left alone: ignoreJobs, or reloadJobs off (the default). Reloading a Job
re-creates it, which takes create and delete on Jobs and the replacement records
(ControllerRevisions): rights granted only to an install that asks for Job reloads.
*/}}
{{- define "reloader.ignoresJobs" -}}
{{- if or .Values.reloader.ignoreJobs (not .Values.reloader.reloadJobs) }}true{{ end -}}
{{- end -}}

{{/* The workload kinds left alone (--ignored-workload-types). */}}
{{- define "reloader.ignoredWorkloadTypes" -}}
{{- $r := .Values.reloader -}}
{{- $out := list -}}
{{- if include "reloader.ignoresJobs" . }}{{ $out = append $out "jobs" }}{{ end -}}
{{- if $r.ignoreCronJobs }}{{ $out = append $out "cronjobs" }}{{ end -}}
{{- if not $r.isOpenshift }}{{ $out = append $out "deploymentconfigs" }}{{ end -}}
{{- join "," $out -}}
{{- end -}}

{{/* custom_annotations keys, by the flag each one sets. */}}
{{- define "reloader.annotationFlags" -}}
auto: auto-annotation
configmap: configmap-annotation
secret: secret-annotation
secretproviderclass: secretproviderclass-annotation
configmap_auto: configmap-auto-annotation
secret_auto: secret-auto-annotation
secretproviderclass_auto: secretproviderclass-auto-annotation
configmap_exclude: configmap-exclude-annotation
secret_exclude: secret-exclude-annotation
secretproviderclass_exclude: secretproviderclass-exclude-annotation
search: auto-search-annotation
match: search-match-annotation
ignore: ignore-annotation
pausePeriod: pause-deployment-annotation
pauseTime: pause-deployment-time-annotation
rolloutStrategy: rollout-strategy-annotation
{{- end -}}

{{/* The container's arguments, as a JSON list. */}}
{{- define "reloader.args" -}}
{{- $r := .Values.reloader -}}
{{- $args := list -}}
{{- $ns := include "reloader.watchedNamespaces" . | fromJsonArray -}}
{{- if $r.namespaces }}{{ $args = append $args (printf "--namespaces=%s" (join "," $ns)) }}{{ end -}}
{{- if include "reloader.global" . }}
{{- with $r.ignoreNamespaces }}{{ $args = append $args (printf "--namespaces-to-ignore=%s" .) }}{{ end -}}
{{- end -}}
{{- /* In double quotes, as upstream's chart writes it; the binary takes them off. */ -}}
{{- with include "reloader.namespaceSelector" . }}{{ $args = append $args (printf "--namespace-selector=%q" .) }}{{ end -}}
{{- with $r.resourceLabelSelector }}{{ $args = append $args (printf "--resource-label-selector=%s" .) }}{{ end -}}
{{- if $r.ignoreSecrets }}{{ $args = append $args "--resources-to-ignore=secrets" }}{{ end -}}
{{- if $r.ignoreConfigMaps }}{{ $args = append $args "--resources-to-ignore=configMaps" }}{{ end -}}
{{- with include "reloader.ignoredWorkloadTypes" . }}{{ $args = append $args (printf "--ignored-workload-types=%s" .) }}{{ end -}}
{{- if $r.reloadOnCreate }}{{ $args = append $args "--reload-on-create=true" }}{{ end -}}
{{- if $r.reloadOnDelete }}{{ $args = append $args "--reload-on-delete=true" }}{{ end -}}
{{- if $r.syncAfterRestart }}{{ $args = append $args "--sync-after-restart=true" }}{{ end -}}
{{- if $r.autoReloadAll }}{{ $args = append $args "--auto-reload-all=true" }}{{ end -}}
{{- if ne $r.reloadStrategy "default" }}{{ $args = append $args (printf "--reload-strategy=%s" $r.reloadStrategy) }}{{ end -}}
{{- if $r.isArgoRollouts }}{{ $args = append $args "--is-Argo-Rollouts=true" }}{{ end -}}
{{- if $r.enableCSIIntegration }}{{ $args = append $args "--enable-csi-integration=true" }}{{ end -}}
{{- if $r.enableEvictStrategy }}{{ $args = append $args "--enable-evict-strategy=true" }}{{ end -}}
{{- if and $r.sharding $r.sharding.enabled }}
{{- $args = append $args (printf "--shards=%d" (int $r.sharding.shards)) -}}
{{- /* The release's own Leases: two sharded releases in one namespace never share members. */ -}}
{{- $args = append $args (printf "--shard-lease-prefix=%s-shard" (include "reloader.fullname" . | trunc 40 | trimSuffix "-")) -}}
{{- with $r.leaderElection.leaseDuration }}{{ $args = append $args (printf "--leader-election-lease-duration=%s" .) }}{{ end -}}
{{- with $r.leaderElection.renewDeadline }}{{ $args = append $args (printf "--leader-election-renew-deadline=%s" .) }}{{ end -}}
{{- with $r.leaderElection.retryPeriod }}{{ $args = append $args (printf "--leader-election-retry-period=%s" .) }}{{ end -}}
{{- else if $r.enableHA }}
{{- $args = append $args "--enable-ha=true" -}}
{{- /* Only when changed: the binary's default is upstream's Lease, and upstream's own binary
(a values file pinning its image) knows no such flag. */ -}}
{{- if ne $r.leaderElection.id "stakater-reloader-lock" }}{{ $args = append $args (printf "--leader-election-id=%s" $r.leaderElection.id) }}{{ end -}}
{{- with $r.leaderElection.leaseDuration }}{{ $args = append $args (printf "--leader-election-lease-duration=%s" .) }}{{ end -}}
{{- with $r.leaderElection.renewDeadline }}{{ $args = append $args (printf "--leader-election-renew-deadline=%s" .) }}{{ end -}}
{{- with $r.leaderElection.retryPeriod }}{{ $args = append $args (printf "--leader-election-retry-period=%s" .) }}{{ end -}}
{{- end -}}
{{- if $r.enablePProf }}
{{- $args = append $args "--enable-pprof=true" -}}
{{- $args = append $args (printf "--pprof-addr=%s" $r.pprofAddr) -}}
{{- end -}}
{{- if $r.secureMetrics }}{{ $args = concat $args (list "--metrics-secure=true" "--health-addr=:8081") }}{{ end -}}
{{- with $r.logFormat }}{{ $args = append $args (printf "--log-format=%s" .) }}{{ end -}}
{{- with $r.logLevel }}{{ $args = append $args (printf "--log-level=%s" .) }}{{ end -}}
{{- /* webhookUrl is no flag: it reaches the binary as env WEBHOOK_URL from a Secret ("reloader.secretEnv"). */ -}}
{{- with $r.webhookTimeout }}{{ $args = append $args (printf "--webhook-timeout=%s" .) }}{{ end -}}
{{- if not (kindIs "invalid" $r.webhookRetries) }}{{ $args = append $args (printf "--webhook-retries=%d" (int $r.webhookRetries)) }}{{ end -}}
{{- if not (kindIs "invalid" $r.kubeAPIQPS) }}{{ $args = append $args (printf "--kube-api-qps=%v" $r.kubeAPIQPS) }}{{ end -}}
{{- if not (kindIs "invalid" $r.kubeAPIBurst) }}{{ $args = append $args (printf "--kube-api-burst=%d" (int $r.kubeAPIBurst)) }}{{ end -}}
{{- $flags := include "reloader.annotationFlags" . | fromYaml -}}
{{- range $key := keys $r.custom_annotations | sortAlpha }}
{{- $value := get $r.custom_annotations $key -}}
{{- if $value }}{{ $args = append $args (printf "--%s=%s" (get $flags $key) $value) }}{{ end -}}
{{- end -}}
{{- with $r.coalesceWindow }}{{ $args = append $args (printf "--coalesce-window=%s" .) }}{{ end -}}
{{- with $r.pacing }}
{{- if not (kindIs "invalid" .reloadRate) }}{{ $args = append $args (printf "--reload-rate=%v" .reloadRate) }}{{ end -}}
{{- if not (kindIs "invalid" .reloadBurst) }}{{ $args = append $args (printf "--reload-burst=%d" (int .reloadBurst)) }}{{ end -}}
{{- if not (kindIs "invalid" .firstSightRate) }}{{ $args = append $args (printf "--first-sight-rate=%v" .firstSightRate) }}{{ end -}}
{{- if eq .firstRecordLedger false }}{{ $args = append $args "--first-record-ledger=false" }}{{ end -}}
{{- with .minReloadInterval }}{{ $args = append $args (printf "--min-reload-interval=%s" .) }}{{ end -}}
{{- end -}}
{{- with $r.mode }}{{ $args = append $args (printf "--mode=%s" .) }}{{ end -}}
{{- if ne (join "," ($r.genericTargetKinds | default list)) "*" }}{{ $args = append $args (printf "--generic-target-kinds=%s" (join "," ($r.genericTargetKinds | default list))) }}{{ end -}}
{{- with $r.flapBreaker }}
{{- if not (kindIs "invalid" .maxChanges) }}{{ $args = append $args (printf "--flap-max-changes=%d" (int .maxChanges)) }}{{ end -}}
{{- with .window }}{{ $args = append $args (printf "--flap-window=%s" .) }}{{ end -}}
{{- with .quiet }}{{ $args = append $args (printf "--flap-quiet=%s" .) }}{{ end -}}
{{- end -}}
{{- with $r.waves }}
{{- if not (kindIs "invalid" .minWorkloads) }}{{ $args = append $args (printf "--waves-min-workloads=%d" (int .minWorkloads)) }}{{ end -}}
{{- end -}}
{{- with $r.rolloutDeadline }}{{ $args = append $args (printf "--rollout-deadline=%s" .) }}{{ end -}}
{{- with $r.reconcileTimeout }}{{ $args = append $args (printf "--reconcile-timeout=%s" .) }}{{ end -}}
{{- if not (kindIs "invalid" $r.workers) }}{{ $args = append $args (printf "--workers=%d" (int $r.workers)) }}{{ end -}}
{{- if $r.runCronJobsOnReload }}{{ $args = append $args "--run-cronjobs-on-reload=true" }}{{ end -}}
{{- if not (kindIs "invalid" $r.recreateFinishedJobs) }}{{ $args = append $args (printf "--recreate-finished-jobs=%t" $r.recreateFinishedJobs) }}{{ end -}}
{{- if .Values.planWebhook.enabled }}{{ $args = concat $args (list (printf "--plan-webhook-addr=:%d" (int .Values.planWebhook.port)) "--plan-webhook-cert-dir=/var/run/reloader/plan-webhook") }}
{{- $ca := include "reloader.planWebhookClientAuth" . }}{{ $args = append $args (printf "--plan-webhook-client-auth=%s" $ca) }}
{{- if and (eq $ca "cert") .Values.planWebhook.clientAuth.allowedNames }}{{ $args = append $args (printf "--plan-webhook-client-names=%s" (join "," .Values.planWebhook.clientAuth.allowedNames)) }}{{ end -}}
{{- end -}}
{{- toJson $args -}}
{{- end -}}

{{/*
RBAC: the same table as internal/rbac (the test compares them for a matrix of values).
Watched rules apply where reloader watches: a ClusterRole, or a Role per watched namespace.
*/}}
{{- define "reloader.watchedRules" -}}
{{- $r := .Values.reloader -}}
{{- $writes := not (include "reloader.webhook" .) -}}
{{- $ignoreJobs := include "reloader.ignoresJobs" . -}}
{{- $read := list "get" "list" "watch" -}}
{{- $kind := $read -}}
{{- if $writes }}{{ $kind = append $read "patch" }}{{ end -}}
{{- $rules := list -}}
{{- if not $r.ignoreConfigMaps }}{{ $rules = append $rules (dict "apiGroups" (list "") "resources" (list "configmaps") "verbs" $read) }}{{ end -}}
{{- if not $r.ignoreSecrets }}{{ $rules = append $rules (dict "apiGroups" (list "") "resources" (list "secrets") "verbs" $read) }}{{ end -}}
{{- if $r.enableCSIIntegration }}{{ $rules = append $rules (dict "apiGroups" (list "secrets-store.csi.x-k8s.io") "resources" (list "secretproviderclasspodstatuses") "verbs" $read) }}{{ end -}}
{{- $rules = append $rules (dict "apiGroups" (list "apps") "resources" (list "deployments" "statefulsets" "daemonsets") "verbs" $kind) -}}
{{- if not $r.ignoreCronJobs }}{{ $rules = append $rules (dict "apiGroups" (list "batch") "resources" (list "cronjobs") "verbs" $kind) }}{{ end -}}
{{- if not $ignoreJobs }}
{{- /* A Job's template is immutable: a reload deletes it and creates it again. */ -}}
{{- $jobs := $kind }}{{ if $writes }}{{ $jobs = concat $kind (list "create" "delete") }}{{ end -}}
{{- $rules = append $rules (dict "apiGroups" (list "batch") "resources" (list "jobs") "verbs" $jobs) -}}
{{- if $writes }}
{{- /* The replacement is written down first, as a ControllerRevision beside the Job, so that one cut short by a crash is finished. */ -}}
{{- /* A record is read whole (get) only when acted on: the cache keeps no record's data. */ -}}
{{- $rules = append $rules (dict "apiGroups" (list "apps") "resources" (list "controllerrevisions") "verbs" (list "get" "list" "watch" "create" "patch" "delete")) -}}
{{- end -}}
{{- else if and $writes $r.runCronJobsOnReload (not $r.ignoreCronJobs) -}}
{{- $rules = append $rules (dict "apiGroups" (list "batch") "resources" (list "jobs") "verbs" (list "create")) -}}
{{- end -}}
{{- if and $writes (or (not $ignoreJobs) (and $r.runCronJobsOnReload (not $r.ignoreCronJobs))) }}
{{- /* Jobs created keep their CronJob's ownerReference with blockOwnerDeletion: OwnerReferencesPermissionEnforcement (OpenShift's default) wants update on the owner's finalizers. */ -}}
{{- $rules = append $rules (dict "apiGroups" (list "batch") "resources" (list "cronjobs/finalizers") "verbs" (list "update")) -}}
{{- end -}}
{{- if $r.isArgoRollouts }}{{ $rules = append $rules (dict "apiGroups" (list "argoproj.io") "resources" (list "rollouts") "verbs" $kind) }}{{ end -}}
{{- if $r.isOpenshift }}{{ $rules = append $rules (dict "apiGroups" (list "apps.openshift.io") "resources" (list "deploymentconfigs") "verbs" $kind) }}{{ end -}}
{{- /* ReloaderConfigs (the CRD in crds/): read always; their status patched by the leader. */ -}}
{{- $rules = append $rules (dict "apiGroups" (list "reloader.dev") "resources" (list "reloaderconfigs") "verbs" $read) -}}
{{- if $writes }}{{ $rules = append $rules (dict "apiGroups" (list "reloader.dev") "resources" (list "reloaderconfigs/status") "verbs" (list "patch")) }}{{ end -}}
{{- if and $writes $r.enableEvictStrategy }}
{{- /* restart-strategy: evict reads a restarting workload's pods and ReplicaSets live and evicts the pods one at a time. */ -}}
{{- $rules = append $rules (dict "apiGroups" (list "") "resources" (list "pods") "verbs" (list "list")) -}}
{{- $rules = append $rules (dict "apiGroups" (list "") "resources" (list "pods/eviction") "verbs" (list "create")) -}}
{{- $rules = append $rules (dict "apiGroups" (list "apps") "resources" (list "replicasets") "verbs" (list "list")) -}}
{{- end -}}
{{- if $writes }}{{ $rules = append $rules (dict "apiGroups" (list "") "resources" (list "events") "verbs" (list "create" "patch")) }}{{ end -}}
{{- toYaml $rules -}}
{{- end -}}

{{/* "true" when the namespaces are sharded among replicas (reloader.sharding.enabled), else "". */}}
{{- define "reloader.sharded" -}}
{{- if and .Values.reloader.sharding .Values.reloader.sharding.enabled }}true{{ end -}}
{{- end -}}

{{/* Rules on cluster-scoped resources: always in a ClusterRole. */}}
{{- define "reloader.clusterRules" -}}
{{- $rules := list -}}
{{- if or (include "reloader.namespaceSelector" .) (include "reloader.sharded" .) -}}
{{- $rules = append $rules (dict "apiGroups" (list "") "resources" (list "namespaces") "verbs" (list "get" "list" "watch")) -}}
{{- end -}}
{{- /* secureMetrics: who a scraper is, and whether it may get /metrics, asked of the API server. */ -}}
{{- /* The plan webhook's token mode asks the same of its callers. */ -}}
{{- if or .Values.reloader.secureMetrics (and .Values.planWebhook.enabled (eq (include "reloader.planWebhookClientAuth" .) "token")) -}}
{{- $rules = append $rules (dict "apiGroups" (list "authentication.k8s.io") "resources" (list "tokenreviews") "verbs" (list "create")) -}}
{{- $rules = append $rules (dict "apiGroups" (list "authorization.k8s.io") "resources" (list "subjectaccessreviews") "verbs" (list "create")) -}}
{{- end -}}
{{- with $rules }}{{ toYaml . }}{{ end -}}
{{- end -}}

{{/* Rules in reloader's own namespace: the HA Lease and the meta-info ConfigMap. */}}
{{- define "reloader.ownRules" -}}
{{- $r := .Values.reloader -}}
{{- $rules := list -}}
{{- if $r.enableHA }}
{{- $rules = append $rules (dict "apiGroups" (list "coordination.k8s.io") "resources" (list "leases") "verbs" (list "create")) -}}
{{- $rules = append $rules (dict "apiGroups" (list "coordination.k8s.io") "resources" (list "leases") "resourceNames" (list $r.leaderElection.id) "verbs" (list "get" "update")) -}}
{{- end -}}
{{- if include "reloader.sharded" . }}
{{- /* --shards: member and shard Leases, named after replicas and shards that come and go. */ -}}
{{- $rules = append $rules (dict "apiGroups" (list "coordination.k8s.io") "resources" (list "leases") "verbs" (list "get" "list" "watch" "create" "update" "delete")) -}}
{{- end -}}
{{- $rules = append $rules (dict "apiGroups" (list "") "resources" (list "configmaps") "resourceNames" (list "reloader-meta-info") "verbs" (list "create" "patch")) -}}
{{- if and (not (include "reloader.webhook" .)) (not (eq (($r.pacing | default dict).firstRecordLedger) false)) }}
{{- /* The ledger of first records (--first-record-ledger): a ConfigMap per workload namespace, listed by label, created, updated and (once empty) deleted by reloader alone. */ -}}
{{- $rules = append $rules (dict "apiGroups" (list "") "resources" (list "configmaps") "verbs" (list "get" "list" "watch" "create" "update" "delete")) -}}
{{- end -}}
{{- if include "reloader.usesHashKey" . }}
{{- /* The install key (Secret hashes, Job replacement records), by name only: created by a server-side apply (create and patch by name), then read. */ -}}
{{- $rules = append $rules (dict "apiGroups" (list "") "resources" (list "secrets") "resourceNames" (list "reloader-hash-key") "verbs" (list "get" "create" "patch")) -}}
{{- /* The Warning Event when reloader may not use the key (a create has no name to restrict it to). */ -}}
{{- $rules = append $rules (dict "apiGroups" (list "") "resources" (list "events") "verbs" (list "create")) -}}
{{- end -}}
{{- toYaml $rules -}}
{{- end -}}

{{/*
Variables whose values hold tokens (webhook and alert URLs, a proxy's credentials). Wherever
the values give them, they go into the chart's Secret and reach the container through
secretKeyRef: the Deployment (args, env values) is readable by anyone with `view`.
*/}}
{{- define "reloader.secretEnvNames" -}}
{{- toJson (list "WEBHOOK_URL" "ALERT_WEBHOOK_URL" "ALERT_WEBHOOK_PROXY") -}}
{{- end -}}

{{/* The chart's Secret, as a JSON object NAME: value: deployment.env.secret, the token-bearing variables of deployment.env.open, and webhookUrl as WEBHOOK_URL. */}}
{{- define "reloader.secretEnv" -}}
{{- $r := .Values.reloader -}}
{{- $names := include "reloader.secretEnvNames" . | fromJsonArray -}}
{{- $out := dict -}}
{{- range $name, $value := $r.deployment.env.open }}
{{- if and (has $name $names) (not (kindIs "invalid" $value)) }}{{ $_ := set $out $name ($value | toString) }}{{ end -}}
{{- end -}}
{{- range $name, $value := $r.deployment.env.secret }}
{{- if not (kindIs "invalid" $value) }}{{ $_ := set $out $name ($value | toString) }}{{ end -}}
{{- end -}}
{{- with $r.webhookUrl }}{{ $_ := set $out "WEBHOOK_URL" (toString .) }}{{ end -}}
{{- toJson $out -}}
{{- end -}}

{{/* "true" when reloader notifies instead of reloading: webhookUrl, or webhookUrlSecret names a Secret. */}}
{{- define "reloader.webhook" -}}
{{- $r := .Values.reloader -}}
{{- $existing := $r.webhookUrlSecret | default dict -}}
{{- if and $r.webhookUrl $existing.name -}}
{{- fail "reloader.webhookUrl and reloader.webhookUrlSecret.name exclude each other: give the URL, or the Secret that holds it" -}}
{{- end -}}
{{- if or $r.webhookUrl $existing.name }}true{{ end -}}
{{- end -}}

{{/*
Whether reloader uses the install key (Secret reloader-hash-key): it keys Secret hashes, and
signs the records of Job replacements (Jobs reloaded, and not only notified by a webhook).
The RBAC on the key and the ReloaderHashKeyFallback alert follow it.
*/}}
{{- define "reloader.usesHashKey" -}}
{{- $r := .Values.reloader -}}
{{- if or (not $r.ignoreSecrets) (and (not (include "reloader.ignoresJobs" .)) (not (include "reloader.webhook" .))) }}true{{ end -}}
{{- end -}}

{{/* The plan webhook's Service, certificate and configuration name. */}}
{{- define "reloader.planWebhookName" -}}
{{- printf "%s-plan-webhook" (include "reloader.fullname" . | trunc 50 | trimSuffix "-") -}}
{{- end -}}

{{/* How the plan webhook knows the API server (planWebhook.clientAuth.mode): cert, token or none. */}}
{{- define "reloader.planWebhookClientAuth" -}}
{{- (.Values.planWebhook.clientAuth | default dict).mode | default "cert" -}}
{{- end -}}

{{/* "true" when the plan webhook's TLS comes from cert-manager: asked for, and its API served. */}}
{{- define "reloader.planWebhookCertManager" -}}
{{- $pw := .Values.planWebhook -}}
{{- if and $pw.enabled $pw.certManager.enabled (.Capabilities.APIVersions.Has "cert-manager.io/v1") }}true{{ end -}}
{{- end -}}
