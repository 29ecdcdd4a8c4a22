{{/* The release's name for its objects, at most 63 characters. */}}
{{- define "flashsale.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "flashsale.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* Selector labels of a component (api, worker). */}}
{{- define "flashsale.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "flashsale.secretName" -}}
{{- default (include "flashsale.fullname" .) .Values.existingSecret -}}
{{- end -}}

{{- define "flashsale.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "flashsale.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "flashsale.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* SHUTDOWN_TIMEOUT in whole seconds (it is a Go duration: 15s, 1m). */}}
{{- define "flashsale.shutdownSeconds" -}}
{{- $d := .Values.config.SHUTDOWN_TIMEOUT | toString -}}
{{- if hasSuffix "ms" $d -}}{{ div (trimSuffix "ms" $d | atoi) 1000 | add1 }}
{{- else if hasSuffix "s" $d -}}{{ trimSuffix "s" $d | atoi }}
{{- else if hasSuffix "m" $d -}}{{ mul (trimSuffix "m" $d | atoi) 60 }}
{{- else -}}{{ fail (printf "config.SHUTDOWN_TIMEOUT %q: give it in ms, s or m" $d) }}
{{- end -}}
{{- end -}}

{{/* What every process reads: the ConfigMap and the Secret. */}}
{{- define "flashsale.envFrom" -}}
- configMapRef:
    name: {{ include "flashsale.fullname" . }}
- secretRef:
    name: {{ include "flashsale.secretName" . }}
{{- end -}}

{{/* Checks the values that have no workable default. */}}
{{- define "flashsale.validate" -}}
{{- if not (has .Values.redis.mode (list "standalone" "sentinel" "cluster")) -}}
{{- fail (printf "redis.mode %q: standalone, sentinel or cluster" .Values.redis.mode) -}}
{{- end -}}
{{- if contains "," .Values.redis.url -}}
{{- fail "redis.url: list further hosts as ?addr=host:port&addr=host:port, not with commas (go-redis reads a comma-separated host list as one address)" -}}
{{- end -}}
{{- if not .Values.existingSecret -}}
{{- $_ := required "redis.url is required (or existingSecret with REDIS_URL)" .Values.redis.url -}}
{{- $_ := required "mysql.dsn is required (or existingSecret with MYSQL_DSN)" .Values.mysql.dsn -}}
{{- if lt (len (required "secrets.jwtSecret is required (32+ bytes)" .Values.secrets.jwtSecret)) 32 -}}
{{- fail "secrets.jwtSecret: 32 bytes or more" -}}
{{- end -}}
{{- if lt (len (required "secrets.adminToken is required (32+ bytes)" .Values.secrets.adminToken)) 32 -}}
{{- fail "secrets.adminToken: 32 bytes or more" -}}
{{- end -}}
{{- if eq .Values.payments.provider "stripe" -}}
{{- $_ := required "secrets.stripeSecretKey is required with payments.provider stripe" .Values.secrets.stripeSecretKey -}}
{{- $_ := required "secrets.stripeWebhookSecret is required with payments.provider stripe" .Values.secrets.stripeWebhookSecret -}}
{{- end -}}
{{- end -}}
{{- end -}}
