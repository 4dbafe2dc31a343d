{{/* SPDX-License-Identifier: Apache-2.0 */}}

{{/* The chart name, or nameOverride (upstream's `slurm-bridge.name`). */}}
{{- define "slurm-bridge.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Upstream defines it and never uses it; kept for templates that might. */}}
{{- define "slurm-bridge.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "slurm-bridge.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "slurm-bridge.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{/* Common labels. */}}
{{- define "slurm-bridge.labels" -}}
helm.sh/chart: {{ include "slurm-bridge.chart" . }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/*
The scheduler name: the seed's config.schedulerName, else schedulerConfig.schedulerName, else
slurm-bridge-scheduler (upstream printed a broken name when it was empty).
*/}}
{{- define "slurm-bridge.scheduler.name" -}}
{{- $c := .Values.config | default dict -}}
{{- coalesce $c.schedulerName .Values.schedulerConfig.schedulerName "slurm-bridge-scheduler" -}}
{{- end -}}

{{- define "slurm-bridge.controllers.name" -}}
{{- printf "%s-controllers" (include "slurm-bridge.name" .) -}}
{{- end -}}

{{- define "slurm-bridge.admission.name" -}}
{{- printf "%s-admission" (include "slurm-bridge.name" .) -}}
{{- end -}}

{{/* Selector labels (immutable in a Deployment: upstream's exactly). */}}
{{- define "slurm-bridge.scheduler.selectorLabels" -}}
app.kubernetes.io/name: {{ include "slurm-bridge.scheduler.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
{{- define "slurm-bridge.controllers.selectorLabels" -}}
app.kubernetes.io/name: {{ include "slurm-bridge.controllers.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}
{{- define "slurm-bridge.admission.selectorLabels" -}}
app.kubernetes.io/name: {{ include "slurm-bridge.admission.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "slurm-bridge.scheduler.labels" -}}
{{ include "slurm-bridge.labels" . }}
{{ include "slurm-bridge.scheduler.selectorLabels" . }}
app.kubernetes.io/component: scheduler
{{- end -}}
{{- define "slurm-bridge.controllers.labels" -}}
{{ include "slurm-bridge.labels" . }}
{{ include "slurm-bridge.controllers.selectorLabels" . }}
app.kubernetes.io/component: controllers
{{- end -}}
{{- define "slurm-bridge.admission.labels" -}}
{{ include "slurm-bridge.labels" . }}
{{ include "slurm-bridge.admission.selectorLabels" . }}
app.kubernetes.io/component: admission
{{- end -}}

{{/*
Image references: repository (falling back to this project's registry and the component's
name, as upstream fell back to its own) and tag (falling back to the chart version, as
upstream), quoted.
Call with (dict "image" .Values.x.image "component" "scheduler" "ctx" $).
*/}}
{{- define "slurm-bridge.imageRef" -}}
{{- $repo := .image.repository | default (printf "ghcr.io/slurm-bridge-cpp/%s-%s" (include "slurm-bridge.name" .ctx) .component) -}}
{{- $tag := .image.tag | default .ctx.Chart.Version -}}
{{- printf "%s:%s" $repo (toString $tag) | quote -}}
{{- end -}}

{{/*
Log level: klog-style integers (scheduler.verbosity) and zap-style names or integers
(controllers.verbosity) mapped onto --log-level. null or 0 = info.
*/}}
{{- define "slurm-bridge.logLevel" -}}
{{- $v := . -}}
{{- if kindIs "invalid" $v -}}info
{{- else if kindIs "string" $v -}}
{{- $s := lower $v -}}
{{- if eq $s "panic" "dpanic" "fatal" -}}critical
{{- else if eq $s "warning" -}}warn
{{- else if has $s (list "trace" "debug" "info" "warn" "error" "critical" "off") -}}{{ $s }}
{{- else if regexMatch "^[0-9]+$" $s -}}{{ include "slurm-bridge.logLevel" (atoi $s) }}
{{- else -}}{{ fail (printf "verbosity %q: want debug, info, warn, error, panic or an integer" $v) }}
{{- end -}}
{{- else -}}
{{- $n := int $v -}}
{{- if le $n 0 -}}info{{- else if lt $n 5 -}}debug{{- else -}}trace{{- end -}}
{{- end -}}
{{- end -}}

{{/* The replica count: as given (0 allowed), 1 when unset. */}}
{{- define "slurm-bridge.replicas" -}}
{{- if kindIs "invalid" . -}}1{{- else -}}{{ int . }}{{- end -}}
{{- end -}}

{{/* PodDisruptionBudget apiVersion: policy/v1 (served since 1.21; the chart needs 1.34). */}}
{{- define "slurm-bridge.pdb.apiVersion" -}}policy/v1{{- end -}}

{{/*
A PDB's budget: maxUnavailable instead of minAvailable when it is set (the values comment
upstream promises this; its template rendered both, which the API refuses).
*/}}
{{- define "slurm-bridge.pdb.budget" -}}
{{- if not (kindIs "invalid" .maxUnavailable) -}}
maxUnavailable: {{ .maxUnavailable }}
{{- else -}}
minAvailable: {{ .minAvailable | default 1 }}
{{- end -}}
{{- end -}}

{{/* Hardened container securityContext (the image runs as uid 65532). */}}
{{- define "slurm-bridge.securityContext" -}}
privileged: false
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{/* The Lease names (upstream's). */}}
{{- define "slurm-bridge.controllers.leaseName" -}}69d5fe47.my.slinky.slurm.net{{- end -}}

{{/* Common args of scheduler and controllers. Call with (dict "ctx" $ "leaderElect" b "lease" n "verbosity" v "ports" p). */}}
{{- define "slurm-bridge.runArgs" -}}
- --config=/etc/slurm-bridge/config.yaml
- --log-level={{ include "slurm-bridge.logLevel" .verbosity }}
- --log-format={{ .ctx.Values.sharedConfig.logFormat | default "text" }}
- --metrics-bind-address={{ include "slurm-bridge.bindAddress" .ports.metrics }}
- --health-probe-bind-address={{ include "slurm-bridge.bindAddress" .ports.health }}
{{- if .leaderElect }}
- --leader-elect
- --leader-election-namespace={{ include "slurm-bridge.namespace" .ctx }}
- --leader-election-id={{ .lease }}
{{- end }}
{{- end -}}

{{/*
The JWT Secret: sharedConfig.slurmJwtSecret is a Secret name (key auth-token, upstream up to
1.3) or, as in later upstream charts, a SecretKeySelector {name, key}.
*/}}
{{- define "slurm-bridge.jwtSecret.name" -}}
{{- $s := .Values.sharedConfig.slurmJwtSecret -}}
{{- if kindIs "map" $s }}{{ required "sharedConfig.slurmJwtSecret.name is required" $s.name }}{{ else }}{{ required "sharedConfig.slurmJwtSecret is required" $s }}{{ end -}}
{{- end -}}
{{- define "slurm-bridge.jwtSecret.key" -}}
{{- $s := .Values.sharedConfig.slurmJwtSecret -}}
{{- if kindIs "map" $s }}{{ $s.key | default "auth-token" }}{{ else }}auth-token{{ end -}}
{{- end -}}

{{/* The Secret the webhook serves from. */}}
{{- define "slurm-bridge.admission.tlsSecret" -}}
{{- $tls := .Values.admission.tls | default dict -}}
{{- if and (not .Values.admission.certManager.enabled) $tls.existingSecret -}}
{{- $tls.existingSecret -}}
{{- else -}}
{{- include "slurm-bridge.admission.name" . -}}
{{- end -}}
{{- end -}}

{{/* A component's ports (`<component>.ports`) with the defaults for keys left out. Call with
(list .Values.<component>.ports default-dict); prints YAML, read back with fromYaml. */}}
{{- define "slurm-bridge.ports" -}}
{{- $given := index . 0 | default dict -}}
{{- $out := dict -}}
{{- range $k, $v := index . 1 -}}
{{- $p := index $given $k -}}
{{- if kindIs "invalid" $p }}{{ $p = $v }}{{ end -}}
{{- if or (lt (int $p) 0) (gt (int $p) 65535) }}{{ fail (printf "ports.%s: %v is not a port (0 = off)" $k $p) }}{{ end -}}
{{- $_ := set $out $k (int $p) -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/* A listen address for a port: ":PORT", or "0" (the listener off) for 0. */}}
{{- define "slurm-bridge.bindAddress" -}}
{{- if gt (int .) 0 }}:{{ int . }}{{ else }}0{{ end -}}
{{- end -}}

{{/* The pod's network: hostNetwork (with the DNS policy that keeps cluster DNS) when asked. */}}
{{- define "slurm-bridge.podNetwork" -}}
{{- if . }}
hostNetwork: true
dnsPolicy: ClusterFirstWithHostNet
{{- end }}
{{- end -}}

{{/* The container's named ports, each only when on. Call with the ports dict. */}}
{{- define "slurm-bridge.containerPorts" -}}
{{- $any := false -}}
{{- range $k, $v := . }}{{ if gt (int $v) 0 }}{{ $any = true }}{{ end }}{{ end -}}
{{- if $any }}
ports:
{{- range $name := list "https" "metrics" "health" }}
{{- $key := ternary "webhook" $name (eq $name "https") }}
{{- $p := index $ $key | default 0 }}
{{- if gt (int $p) 0 }}
  - name: {{ $name }}
    containerPort: {{ int $p }}
    protocol: TCP
{{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Liveness and readiness probes on the health port (none when it is off). */}}
{{- define "slurm-bridge.probes" -}}
{{- if gt (int .) 0 }}
livenessProbe:
  httpGet:
    path: /healthz
    port: {{ int . }}
  initialDelaySeconds: 15
readinessProbe:
  httpGet:
    path: /readyz
    port: {{ int . }}
{{- end }}
{{- end -}}

{{/*
(ours) Monitoring. The components that serve /metrics, as a YAML list read back with
fromYamlArray: the scheduler and the controllers, each only while its metrics port is on;
`name` is its Service's name (the job label a ServiceMonitor gives its series).
*/}}
{{- define "slurm-bridge.metrics.targets" -}}
{{- $s := include "slurm-bridge.ports" (list .Values.scheduler.ports (dict "metrics" 8080 "health" 8081)) | fromYaml -}}
{{- $c := include "slurm-bridge.ports" (list .Values.controllers.ports (dict "metrics" 8080 "health" 8081)) | fromYaml -}}
{{- if gt (int $s.metrics) 0 }}
- component: scheduler
  name: {{ include "slurm-bridge.scheduler.name" . }}
  replicas: {{ include "slurm-bridge.replicas" .Values.scheduler.replicaCount }}
{{- end }}
{{- if gt (int $c.metrics) 0 }}
- component: controllers
  name: {{ include "slurm-bridge.controllers.name" . }}
  replicas: {{ include "slurm-bridge.replicas" .Values.controllers.replicas }}
{{- end }}
{{- end -}}

{{/* (ours) metrics.<key> (serviceMonitor, prometheusRule, dashboard), {} when unset. */}}
{{- define "slurm-bridge.metrics.values" -}}
{{- $m := .ctx.Values.metrics | default dict -}}
{{- toYaml (index $m .key | default dict) -}}
{{- end -}}

{{/* (ours) Labels of the monitoring objects: the common ones, the instance, and the user's. */}}
{{- define "slurm-bridge.metrics.labels" -}}
{{- $l := include "slurm-bridge.labels" .ctx | fromYaml -}}
{{- $_ := set $l "app.kubernetes.io/name" (include "slurm-bridge.name" .ctx) -}}
{{- $_ = set $l "app.kubernetes.io/instance" .ctx.Release.Name -}}
{{- $_ = set $l "app.kubernetes.io/component" "monitoring" -}}
{{- toYaml (merge (dict) (.extra | default dict) $l) -}}
{{- end -}}

{{/*
(ours) The pods' imagePullSecrets: global.imagePullSecrets (as umbrella charts pass them) then
imagePullSecrets, each entry a Secret name or a LocalObjectReference {name: ...}; a name given
twice appears once. Nothing when both are empty.
*/}}
{{- define "slurm-bridge.imagePullSecrets" -}}
{{- $global := .Values.global | default dict -}}
{{- $names := list -}}
{{- range concat ($global.imagePullSecrets | default list) (.Values.imagePullSecrets | default list) -}}
{{- $n := "" -}}
{{- if kindIs "map" . }}{{ $n = .name }}{{ else }}{{ $n = . }}{{ end -}}
{{- if not $n }}{{ fail "imagePullSecrets: an entry without a Secret name; give `- name: <Secret>` or `- <Secret>`" }}{{ end -}}
{{- $names = append $names (toString $n) -}}
{{- end -}}
{{- with uniq $names }}
imagePullSecrets:
{{- range . }}
  - name: {{ . | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/*
(ours) A pod template's own labels and annotations: <component>.podLabels after the chart's
labels, <component>.podAnnotations after checksum/config. A key the chart sets itself (the
selector labels above all: a Deployment's selector is immutable) is refused, never replaced.
Call with (dict "key" "scheduler" "values" .Values.scheduler "labels" (include "...labels" .)
"what" "podLabels" or "podAnnotations"); prints the user's entries as YAML, or nothing.
*/}}
{{- define "slurm-bridge.podMeta" -}}
{{- $given := index .values .what | default dict -}}
{{- $own := .labels | fromYaml -}}
{{- if eq .what "podAnnotations" }}{{ $own = dict "checksum/config" "" }}{{ end -}}
{{- range $k, $v := $given -}}
{{- if hasKey $own $k }}{{ fail (printf "%s.%s.%s: the chart sets this key itself (the Deployment's selector, common labels or config checksum); choose another key" $.key $.what $k) }}{{ end -}}
{{- end -}}
{{- with $given }}{{ toYaml . }}{{ end -}}
{{- end -}}

{{/*
(ours) Extra volumes, mounts and placement of a pod spec. Call with the component's values.
extraVolumeMounts goes on the component's container (the caller places it); the rest are
pod-level and each is rendered only when set.
*/}}
{{- define "slurm-bridge.podPlacement" -}}
{{- with .nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* (ours) A ServiceAccount's metadata.annotations (<component>.serviceAccount.annotations), or nothing. */}}
{{- define "slurm-bridge.serviceAccount.annotations" -}}
{{- $sa := .serviceAccount | default dict -}}
{{- with $sa.annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
