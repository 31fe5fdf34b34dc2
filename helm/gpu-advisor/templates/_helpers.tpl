{{/*
Expand the name of the chart.
*/}}
{{- define "gpu-advisor.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Create a default fully qualified app name (63 characters: some Kubernetes name fields are
limited to this by the DNS naming spec). If the release name contains the chart name it is
used as the full name.
*/}}
{{- define "gpu-advisor.fullname" -}}
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

{{/*
Create chart name and version as used by the chart label.
*/}}
{{- define "gpu-advisor.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Common labels
*/}}
{{- define "gpu-advisor.labels" -}}
helm.sh/chart: {{ include "gpu-advisor.chart" . }}
{{ include "gpu-advisor.selectorLabels" . }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
Selector labels
*/}}
{{- define "gpu-advisor.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpu-advisor.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
Create the name of the service account to use
*/}}
{{- define "gpu-advisor.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "gpu-advisor.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
True when the chart creates its own Secret (a Redis URL or an admin token given as a value).
*/}}
{{- define "gpu-advisor.ownSecret" -}}
{{- if or (and .Values.redis.url (not .Values.redis.existingSecret)) (and .Values.adminToken.value (not .Values.adminToken.existingSecret)) -}}
true
{{- end }}
{{- end }}
