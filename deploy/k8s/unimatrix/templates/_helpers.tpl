{{/* Chart name, truncated for label values. */}}
{{- define "unimatrix.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Release-qualified base name of every resource. Per-service resources append "-<service>", so it
is cut to 50 characters to leave room for the longest suffix ("-presence-headless").
*/}}
{{- define "unimatrix.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 45 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 45 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 45 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* chart-version label value. */}}
{{- define "unimatrix.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels that select one component's pods. Takes (dict "root" $ "component" "<name>"). */}}
{{- define "unimatrix.selectorLabels" -}}
app.kubernetes.io/name: {{ include "unimatrix.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* Every label of a resource. Takes (dict "root" $ "component" "<name>"). */}}
{{- define "unimatrix.labels" -}}
helm.sh/chart: {{ include "unimatrix.chart" .root }}
{{ include "unimatrix.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/part-of: unimatrix
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The container image: repository@digest, or repository:tag (tag defaults to appVersion). */}}
{{- define "unimatrix.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The ServiceAccount the service pods run as. */}}
{{- define "unimatrix.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "unimatrix.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret holding DATABASE_URL, REDIS_URL, UMX_INTERNAL_KEY and UMX_OPERATOR_TOKEN. */}}
{{- define "unimatrix.secretName" -}}
{{- default (include "unimatrix.fullname" .) .Values.secrets.existingSecret }}
{{- end }}

{{/* host:port of a service inside the cluster. Takes (dict "root" $ "component" "<name>"). */}}
{{- define "unimatrix.address" -}}
{{- $svc := index .root.Values.services .component -}}
{{- printf "%s-%s:%d" (include "unimatrix.fullname" .root) .component (int $svc.port) }}
{{- end }}

{{/*
An environment value as a string. Helm reads YAML numbers as float64, which print as 6.048e+08;
whole numbers are printed as integers instead.
*/}}
{{- define "unimatrix.envValue" -}}
{{- if kindIs "float64" . }}{{ int64 . }}{{ else }}{{ toString . }}{{ end }}
{{- end }}

{{/*
Seconds Kubernetes waits between the start of termination and SIGKILL: the preStop sleep, then
the services' own drain (UMX_DRAIN_DELAY_MS serving NOT_SERVING, then UMX_SHUTDOWN_GRACE_MS for
streams to end after their going-away, rounded up), then a margin for closing Prisma and Redis.
Always longer than the drain.
*/}}
{{- define "unimatrix.terminationGracePeriodSeconds" -}}
{{- $drainMs := add (int64 .Values.config.env.UMX_SHUTDOWN_GRACE_MS) (int64 (default 0 .Values.config.env.UMX_DRAIN_DELAY_MS)) }}
{{- add .Values.shutdown.preStopSleepSeconds (div (add $drainMs 999) 1000) .Values.shutdown.extraGraceSeconds }}
{{- end }}

{{/* The Secret key of one connection setting. Takes (dict "root" $ "key" "databaseUrl"). */}}
{{- define "unimatrix.secretKey" -}}
{{- index .root.Values.secrets.keys .key }}
{{- end }}
