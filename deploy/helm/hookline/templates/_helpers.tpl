{{/* Names and labels. */}}
{{- define "hookline.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "hookline.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "hookline.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "hookline.selectorLabels" -}}
app.kubernetes.io/name: {{ include "hookline.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: dispatcher
{{- end }}

{{- define "hookline.labels" -}}
helm.sh/chart: {{ include "hookline.chart" . }}
{{ include "hookline.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: hookline
{{- end }}

{{- define "hookline.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "hookline.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "hookline.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The settings that other resources derive from the dispatcher's config. */}}
{{- define "hookline.groupId" -}}
{{- default "hookline-dispatcher" .Values.config.group_id }}
{{- end }}

{{- define "hookline.eventsTopic" -}}
{{- default "webhook-events" (dig "topics" "events" "" .Values.config) }}
{{- end }}

{{- define "hookline.bootstrapServers" -}}
{{- $servers := dig "kafka" "bootstrap_servers" "" .Values.config }}
{{- required "config.kafka.bootstrap_servers is required" $servers }}
{{- end }}

{{- define "hookline.shutdownGraceMs" -}}
{{- $ms := .Values.config.shutdown_grace_ms }}
{{- if kindIs "invalid" $ms }}15000{{ else }}{{ int64 $ms }}{{ end }}
{{- end }}

{{/* Seconds: ceil(shutdown_grace_ms / 1000) + the margin, so that a drain can finish. */}}
{{- define "hookline.terminationGracePeriodSeconds" -}}
{{- $ms := include "hookline.shutdownGraceMs" . | int64 }}
{{- $margin := int64 .Values.terminationGraceMarginSeconds }}
{{- if lt $margin 1 }}
{{- fail "terminationGraceMarginSeconds must be at least 1: the pod's grace period must exceed shutdown_grace_ms" }}
{{- end }}
{{- add (div (add $ms 999) 1000) $margin }}
{{- end }}

{{/*
Checks that span several values; included by the Deployment so that a bad combination
fails `helm template` and `helm install` with a message.
*/}}
{{- define "hookline.validate" -}}
{{- $partitions := int .Values.topics.partitions }}
{{- if lt $partitions 1 }}
{{- fail "topics.partitions must be at least 1" }}
{{- end }}
{{- if and .Values.keda.enabled .Values.hpa.enabled }}
{{- fail "keda.enabled and hpa.enabled are alternatives: enable at most one" }}
{{- end }}
{{- if .Values.keda.enabled }}
{{- $min := int .Values.keda.minReplicaCount }}
{{- $max := int .Values.keda.maxReplicaCount }}
{{- if lt $min 1 }}
{{- fail "keda.minReplicaCount must be at least 1: the retry tiers need a consumer even when the events topic has no lag" }}
{{- end }}
{{- if gt $min $max }}
{{- fail "keda.minReplicaCount must not exceed keda.maxReplicaCount" }}
{{- end }}
{{- if gt $max $partitions }}
{{- fail (printf "keda.maxReplicaCount (%d) must not exceed topics.partitions (%d): a group has at most one consumer per partition" $max $partitions) }}
{{- end }}
{{- else if .Values.hpa.enabled }}
{{- $min := int .Values.hpa.minReplicas }}
{{- $max := int .Values.hpa.maxReplicas }}
{{- if lt $min 1 }}
{{- fail "hpa.minReplicas must be at least 1" }}
{{- end }}
{{- if gt $min $max }}
{{- fail "hpa.minReplicas must not exceed hpa.maxReplicas" }}
{{- end }}
{{- if gt $max $partitions }}
{{- fail (printf "hpa.maxReplicas (%d) must not exceed topics.partitions (%d): a group has at most one consumer per partition" $max $partitions) }}
{{- end }}
{{- else if gt (int .Values.replicaCount) $partitions }}
{{- fail (printf "replicaCount (%d) must not exceed topics.partitions (%d): a group has at most one consumer per partition" (int .Values.replicaCount) $partitions) }}
{{- end }}
{{- range .Values.kafkaSecretProperties }}
{{- if not (and .property .secretName .secretKey) }}
{{- fail "each kafkaSecretProperties entry needs property, secretName and secretKey" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
A librdkafka property value as a string: YAML numbers and booleans become their JSON text
(10000, true), never Go's float formatting (1e+06).
*/}}
{{- define "hookline.propertyString" -}}
{{- if kindIs "string" . }}{{ . }}{{ else }}{{ toJson . }}{{ end }}
{{- end }}

{{/*
Secret-backed librdkafka properties: the variables (secretKeyRef) and the arguments that
name them as ${env:VAR} references. hookline resolves a reference when it configures its
clients, so the value is never in the process arguments (Kubernetes expands only $(VAR)).
*/}}
{{- define "hookline.secretPropertyEnv" -}}
{{- range $index, $entry := .Values.kafkaSecretProperties }}
- name: KAFKA_SECRET_PROPERTY_{{ $index }}
  valueFrom:
    secretKeyRef:
      name: {{ $entry.secretName | quote }}
      key: {{ $entry.secretKey | quote }}
{{- end }}
{{- end }}

{{- define "hookline.secretPropertyArgs" -}}
{{- range $index, $entry := .Values.kafkaSecretProperties }}
- {{ printf "--kafka-property=%s=${env:KAFKA_SECRET_PROPERTY_%d}" $entry.property $index | quote }}
{{- end }}
{{- end }}

{{/*
TOML rendering of a map: its scalar and array keys first, then one [table] per nested map,
recursively. Keys that are not bare TOML keys (librdkafka's dotted names) are quoted;
values are written as JSON, which is valid TOML for strings, numbers, booleans and arrays
of them. Null values are left out. kafka.properties values are always strings.
*/}}
{{- define "hookline.tomlKey" -}}
{{- if regexMatch "^[A-Za-z0-9_-]+$" . }}{{ . }}{{ else }}{{ toJson . }}{{ end }}
{{- end }}

{{- define "hookline.tomlTable" -}}
{{- $table := .table }}
{{- $path := .path }}
{{- $strings := .strings }}
{{- range $key := keys $table | sortAlpha }}
{{- $value := get $table $key }}
{{- if and (not (kindIs "map" $value)) (not (kindIs "invalid" $value)) }}
{{- if $strings }}
{{ include "hookline.tomlKey" $key }} = {{ include "hookline.propertyString" $value | toJson }}
{{- else }}
{{ include "hookline.tomlKey" $key }} = {{ toJson $value }}
{{- end }}
{{- end }}
{{- end }}
{{- range $key := keys $table | sortAlpha }}
{{- $value := get $table $key }}
{{- if kindIs "map" $value }}
{{- $sub := ternary (include "hookline.tomlKey" $key) (printf "%s.%s" $path (include "hookline.tomlKey" $key)) (eq $path "") }}
{{- if $value }}

[{{ $sub }}]
{{- include "hookline.tomlTable" (dict "table" $value "path" $sub "strings" (eq $sub "kafka.properties")) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* dispatcher.toml: .Values.config with admin.listen set from .Values.admin. */}}
{{- define "hookline.dispatcherToml" -}}
{{- $config := deepCopy .Values.config }}
{{- $admin := dict }}
{{- if kindIs "map" $config.admin }}
{{- $admin = $config.admin }}
{{- end }}
{{- $_ := set $admin "listen" (printf "%s:%d" .Values.admin.host (int .Values.admin.port)) }}
{{- $_ := set $config "admin" $admin }}
{{- $_ := set $config "shutdown_grace_ms" (include "hookline.shutdownGraceMs" . | int64) }}
# dispatcher.toml, rendered by the hookline chart from .Values.config.
{{- include "hookline.tomlTable" (dict "table" $config "path" "" "strings" false) }}
{{ end }}
