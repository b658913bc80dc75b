{{/* name: nameOverride or the chart's name, lower case. */}}
{{- define "up.name" -}}
{{- .Values.nameOverride | default .Chart.Name | trunc 63 | trimSuffix "-" | lower -}}
{{- end -}}

{{/* fullname: fullnameOverride, else <release>-<name> (always both parts). */}}
{{- define "up.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (.Values.nameOverride | default .Chart.Name) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The namespace of every namespaced object but the per-namespace Roles. */}}
{{- define "up.namespace" -}}
{{- .Values.namespace | default .Release.Namespace -}}
{{- end -}}

{{/* The selector: app and release, then reloader.matchLabels (through tpl) by the caller. */}}
{{- define "up.selector" -}}
app: {{ include "up.fullname" . }}
release: {{ .Release.Name | quote }}
{{- end -}}

{{/* matchLabels through tpl, or nothing. */}}
{{- define "up.matchLabels" -}}
{{- with .Values.reloader.matchLabels }}{{ tpl (toYaml .) $ }}{{ end -}}
{{- end -}}

{{/* Labels of every object (but the PDB and the Secret, which have none). */}}
{{- define "up.labels" -}}
{{ include "up.selector" . }}
app.kubernetes.io/name: {{ include "up.name" . }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
{{- $chart := printf "%s-%s" .Chart.Name (.Chart.Version | replace "+" "_") }}
helm.sh/chart: {{ $chart | quote }}
chart: {{ $chart | quote }}
heritage: {{ .Release.Service | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{- define "up.serviceAccountName" -}}
{{- if .Values.reloader.serviceAccount.create -}}
{{- .Values.reloader.serviceAccount.name | default (include "up.fullname" .) -}}
{{- else -}}
{{- .Values.reloader.serviceAccount.name | default "default" -}}
{{- end -}}
{{- end -}}

{{/* namespaceSelector, passed only when watching globally. */}}
{{- define "up.namespaceSelector" -}}
{{- if .Values.reloader.watchGlobally }}{{ .Values.reloader.namespaceSelector }}{{ end -}}
{{- end -}}

{{/* "true" when standing in for upstream's chart 3 (appVersion v2), whose templates differ
from 2.x where the templates here test it; names, labels and the selector do not differ. */}}
{{- define "up.v3" -}}
{{- if semverCompare ">=3.0.0-0" .Chart.Version }}true{{ end -}}
{{- end -}}

{{/* reloader.namespaces (list or comma string), with the release namespace before chart 3: a
sorted, unique JSON list. */}}
{{- define "up.namespaces" -}}
{{- $in := .Values.reloader.namespaces | default list -}}
{{- if kindIs "string" $in }}{{ $in = splitList "," $in }}{{ end -}}
{{- $out := list -}}
{{- if not (include "up.v3" .) }}{{ $out = append $out (include "up.namespace" .) }}{{ end -}}
{{- range $in }}{{ with (toString . | trim) }}{{ $out = append $out . }}{{ end }}{{ end -}}
{{- $out | uniq | sortAlpha | toJson -}}
{{- end -}}

{{/* The rules of the ClusterRole, or of each Role; $cluster adds those only a ClusterRole has. */}}
{{- define "up.rules" -}}
{{- $r := .root.Values.reloader -}}
{{- $caps := .root.Capabilities -}}
{{- $v3 := include "up.v3" .root -}}
{{- $read := list "list" "get" "watch" -}}
{{- $write := list "list" "get" "update" "patch" -}}
{{- if $v3 }}{{ $write = list "list" "get" "watch" "update" "patch" }}{{ end -}}
{{- $kinds := list -}}
{{- if not $r.ignoreSecrets }}{{ $kinds = append $kinds "secrets" }}{{ end -}}
{{- if not $r.ignoreConfigMaps }}{{ $kinds = append $kinds "configmaps" }}{{ end -}}
{{- $rules := list (dict "apiGroups" (list "") "resources" $kinds "verbs" $read) -}}
{{- if and .cluster (include "up.namespaceSelector" .root) }}
{{- $rules = append $rules (dict "apiGroups" (list "") "resources" (list "namespaces") "verbs" (list "get" "list" "watch")) -}}
{{- end -}}
{{- if and $r.isOpenshift ($caps.APIVersions.Has "apps.openshift.io/v1") }}
{{- $rules = append $rules (dict "apiGroups" (list "apps.openshift.io" "") "resources" (list "deploymentconfigs") "verbs" $write) -}}
{{- end -}}
{{- if and $r.isArgoRollouts ($caps.APIVersions.Has "argoproj.io/v1alpha1") }}
{{- $rules = append $rules (dict "apiGroups" (ternary (list "argoproj.io") (list "argoproj.io" "") (eq $v3 "true")) "resources" (list "rollouts") "verbs" $write) -}}
{{- end -}}
{{- $rules = append $rules (dict "apiGroups" (list "apps") "resources" (list "deployments" "daemonsets" "statefulsets") "verbs" $write) -}}
{{- if or (and (not .cluster) (not $v3)) (not $r.ignoreCronJobs) }}
{{- $rules = append $rules (dict "apiGroups" (list "batch") "resources" (list "cronjobs") "verbs" (ternary $write (list "list" "get") (eq $v3 "true"))) -}}
{{- end -}}
{{- if or (and (not .cluster) (not $v3)) (not $r.ignoreJobs) }}
{{- $rules = append $rules (dict "apiGroups" (list "batch") "resources" (list "jobs") "verbs" (concat (list "create" "delete" "list" "get") (ternary (list "watch") list (eq $v3 "true")))) -}}
{{- end -}}
{{- if $r.enableHA }}
{{- $rules = append $rules (dict "apiGroups" (list "coordination.k8s.io") "resources" (list "leases") "verbs" (list "create" "get" "update")) -}}
{{- end -}}
{{- if $r.enableCSIIntegration }}
{{- $rules = append $rules (dict "apiGroups" (list "secrets-store.csi.x-k8s.io") "resources" (list "secretproviderclasspodstatuses" "secretproviderclasses") "verbs" $read) -}}
{{- end -}}
{{- if $v3 }}
{{- $rules = append $rules (dict "apiGroups" (list "" "events.k8s.io") "resources" (list "events") "verbs" (list "create" "patch" "update")) -}}
{{- else }}
{{- $rules = append $rules (dict "apiGroups" (list "") "resources" (list "events") "verbs" (list "create" "patch")) -}}
{{- end -}}
{{- toYaml $rules -}}
{{- end -}}

{{/* metadata of an RBAC object: name, optional namespace, labels with rbac.labels. */}}
{{- define "up.rbacMeta" -}}
name: {{ .name }}
{{- with .namespace }}
namespace: {{ . }}
{{- end }}
labels:
  {{- include "up.labels" .root | nindent 2 }}
  {{- with .root.Values.reloader.rbac.labels }}
  {{- tpl (toYaml .) $.root | nindent 2 }}
  {{- end }}
  {{- with include "up.matchLabels" .root }}
  {{- . | nindent 2 }}
  {{- end }}
{{- end -}}
