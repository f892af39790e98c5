{{/* The chart's name. */}}
{{- define "vidra.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The release's full name: the release name, with the chart name unless it contains it. */}}
{{- define "vidra.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "vidra.selectorLabels" -}}
app.kubernetes.io/name: {{ include "vidra.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "vidra.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "vidra.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "vidra.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "vidra.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The ServiceAccount bundles for the local cluster are applied as. */}}
{{- define "vidra.localServiceAccountName" -}}
{{- default (printf "%s-local" (include "vidra.fullname" .) | trunc 63 | trimSuffix "-") .Values.localCluster.serviceAccount -}}
{{- end -}}

{{/* The operator's own user name, whose writes the admission policies let through. */}}
{{- define "vidra.operatorUser" -}}
{{- printf "system:serviceaccount:%s:%s" .Release.Namespace (include "vidra.serviceAccountName" .) -}}
{{- end -}}

{{/* The namespace whose labeled kubeconfig Secrets enroll clusters. */}}
{{- define "vidra.clusterSecretNamespace" -}}
{{- default .Release.Namespace .Values.clusterSecretNamespace -}}
{{- end -}}

{{/* Fails on values that cannot work together, so a mistake shows at install time. */}}
{{- define "vidra.validate" -}}
{{- if not (has .Values.mode (list "hub" "standalone")) -}}
{{- fail (printf "mode must be hub or standalone, not %q" .Values.mode) -}}
{{- end -}}
{{- if not (has .Values.rbac.localApply (list "broad" "none")) -}}
{{- fail (printf "rbac.localApply must be broad or none, not %q" .Values.rbac.localApply) -}}
{{- end -}}
{{- if and (gt (int .Values.replicas) 1) (eq .Values.mode "standalone") -}}
{{- fail "replicas > 1 splits a fleet across replicas: it needs mode=hub (a standalone operator runs one replica)" -}}
{{- end -}}
{{- if eq .Values.mode "standalone" -}}
{{- if not .Values.localCluster.enabled -}}
{{- fail "mode=standalone manages only the local cluster: localCluster.enabled must be true" -}}
{{- end -}}
{{- if .Values.infrahub.webhookSecret -}}
{{- fail "infrahub.webhookSecret needs hub mode: in standalone mode the operator may read no Secret" -}}
{{- end -}}
{{- end -}}
{{- end -}}
