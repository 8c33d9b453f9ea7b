{{/* Chart name, truncated to the 63 characters of a DNS label. */}}
{{- define "livehost.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Release-qualified name; the release name alone when it already contains the chart name. */}}
{{- define "livehost.fullname" -}}
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

{{- define "livehost.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "livehost.labels" -}}
helm.sh/chart: {{ include "livehost.chart" . }}
app.kubernetes.io/name: {{ include "livehost.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: livehost
{{- end }}

{{/* Selector labels of one component; call with (dict "root" $ "name" $name). */}}
{{- define "livehost.selectorLabels" -}}
app.kubernetes.io/name: {{ include "livehost.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .name }}
{{- end }}

{{/* Name of one component's objects; call with (dict "root" $ "name" $name). */}}
{{- define "livehost.componentName" -}}
{{- printf "%s-%s" (include "livehost.fullname" .root) .name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "livehost.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "livehost.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "livehost.configMapName" -}}
{{- printf "%s-config" (include "livehost.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The Secret holding the PostgreSQL DSN: the existing one, or the one this chart creates. */}}
{{- define "livehost.postgresSecretName" -}}
{{- if .Values.postgres.existingSecret }}
{{- .Values.postgres.existingSecret }}
{{- else }}
{{- printf "%s-postgres" (include "livehost.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/* image reference of a merged component config; call with (dict "root" $ "c" $c). */}}
{{- define "livehost.image" -}}
{{- printf "%s:%s" .c.image.repository (default .root.Chart.AppVersion .c.image.tag) }}
{{- end }}

{{/* One probe of kind grpc|tcp|mtls|exec; call with (dict "kind" $kind "c" $c "name" $name "timings" $timings).
     mtls: the gRPC health check over mutual TLS, from inside the container (livehost.healthcheck).
     Renders nothing for "none". */}}
{{- define "livehost.probe" -}}
{{- if eq .kind "grpc" }}
grpc:
  port: {{ required "probe kind grpc needs grpc.port" .c.grpc.port }}
{{- else if eq .kind "tcp" }}
tcpSocket:
  port: grpc
{{- else if eq .kind "mtls" }}
exec:
  command: ["python", "-m", "livehost.healthcheck", {{ .name | quote }}, "--quiet"]
{{- else if eq .kind "exec" }}
exec:
  command: {{- toYaml (required "probe kind exec needs probes.exec" .c.probes.exec) | nindent 4 }}
{{- end }}
{{- with .timings }}
{{ toYaml . }}
{{- end }}
{{- end }}
