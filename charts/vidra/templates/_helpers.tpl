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
{{- if eq .Values.mode "agent" -}}
{{- .Values.agent.serviceAccountName -}}
{{- else if .Values.serviceAccount.create -}}
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
{{- if not (has .Values.mode (list "hub" "standalone" "agent")) -}}
{{- fail (printf "mode must be hub, standalone or agent, not %q" .Values.mode) -}}
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
{{- if eq .Values.mode "agent" -}}
{{- if not .Values.agent.serviceAccountName -}}
{{- fail "mode=agent runs as the ServiceAccount kubectl vidra enroll --pull created: agent.serviceAccountName must name it (vidra-agent)" -}}
{{- end -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) -}}
{{- fail "mode=agent with replicas > 1 needs leaderElection.enabled: one agent applies, the others stand by" -}}
{{- end -}}
{{- if .Values.infrahub.webhookSecret -}}
{{- fail "infrahub.webhookSecret needs hub mode: an agent reads no Infrahub, its hub syncs" -}}
{{- end -}}
{{- if eq .Values.rbac.localApply "broad" -}}
{{- fail "rbac.localApply does not apply in mode=agent: the agent applies as the identity kubectl vidra enroll --pull created (--namespaces, --cluster-kinds)" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The deliver policy's variables for one side of a request: "new" reads object, "old" reads
oldObject. target is the cluster admission can name ("" when it cannot: a VidraResource
naming a member by server URL, whose cluster the operator records in status.cluster).
*/}}
{{- define "vidra.deliverVariables" -}}
{{- $v := printf "variables.%s" .side -}}
- name: {{ .side }}Cluster
  expression: "{{ .obj }}.spec.?destination.?cluster.orValue('')"
- name: {{ .side }}Server
  expression: "{{ .obj }}.spec.?destination.?server.orValue('')"
- name: {{ .side }}ServerIsLocal
  expression: >-
    {{ $v }}Server == '' || (url({{ $v }}Server).getScheme().lowerAscii() == 'https' &&
    url({{ $v }}Server).getHostname().lowerAscii() == 'kubernetes.default.svc' &&
    url({{ $v }}Server).getPort() in ['', '443'] && url({{ $v }}Server).getEscapedPath() in ['', '/'])
- name: {{ .side }}Everywhere
  expression: >-
    variables.isSync && ({{ .obj }}.spec.?destination.?clusterSelector.hasValue() ||
    {{ .obj }}.spec.?destination.?clusterFromTarget.orValue(false) ||
    ({{ $v }}Cluster == '' && !{{ $v }}ServerIsLocal))
- name: {{ .side }}Target
  expression: >-
    {{ $v }}Everywhere ? '' : ({{ $v }}Cluster != '' ? {{ $v }}Cluster :
    ({{ $v }}ServerIsLocal ? 'local' : {{ .obj }}.?status.?cluster.orValue('')))
- name: {{ .side }}ServiceAccount
  expression: "variables.isSync ? {{ .obj }}.spec.?template.?serviceAccountName.orValue('') : {{ .obj }}.spec.?serviceAccountName.orValue('')"
- name: {{ .side }}ServiceAccountNamespace
  expression: "{{ .obj }}.spec.?destination.?namespace.orValue('') == '' ? 'default' : {{ .obj }}.spec.destination.namespace"
{{- end -}}

{{/* The deliver policy's validations for one side of a request, when .when holds. */}}
{{- define "vidra.deliverValidations" -}}
{{- $v := printf "variables.%s" .side -}}
- expression: "!({{ .when }}) || !{{ $v }}Everywhere || variables.deliver.check('deliver').allowed()"
  messageExpression: >-
    request.userInfo.username + ' may not deliver to every cluster, as this sync
    {{- if eq .side "old" }} did{{ else }} would{{ end }} (by clusterSelector,
    clusterFromTarget or a server URL): that needs the verb deliver on vidraclusters without
    resourceNames (API group infrahub.operators.com)'
  reason: Forbidden
- expression: "!({{ .when }}) || {{ $v }}Target == '' || variables.deliver.name({{ $v }}Target).check('deliver').allowed()"
  messageExpression: >-
    request.userInfo.username + ' may not deliver to cluster ' + {{ $v }}Target + ': that
    needs the verb deliver on vidraclusters named ' + {{ $v }}Target + ' (API group
    infrahub.operators.com); kubectl vidra can-deliver ' + {{ $v }}Target + ' checks it'
  reason: Forbidden
{{- if not .recordsRequester }}
# Without MutatingAdmissionPolicies the operator cannot learn who asked: a server URL that
# names a member needs deliver on every cluster.
- expression: "!({{ .when }}) || variables.isSync || {{ $v }}Target != '' || variables.deliver.check('deliver').allowed()"
  messageExpression: >-
    request.userInfo.username + ' may not deliver to a cluster named by its server URL on
    this API server: that needs the verb deliver on vidraclusters without resourceNames
    (API group infrahub.operators.com); name the cluster with destination.cluster instead'
  reason: Forbidden
{{- end }}
# A bundle for the hub runs as the ServiceAccount it names: only someone who may act as
# that account may name it.
- expression: >-
    !({{ .when }}) || {{ $v }}Target != 'local' || {{ $v }}ServiceAccount == '' ||
    authorizer.group('').resource('serviceaccounts').namespace({{ $v }}ServiceAccountNamespace).name({{ $v }}ServiceAccount).check('impersonate').allowed()
  messageExpression: >-
    request.userInfo.username + ' may not deliver to the hub as ServiceAccount ' +
    {{ $v }}ServiceAccountNamespace + '/' + {{ $v }}ServiceAccount + ': that needs the verb
    impersonate on that serviceaccount'
  reason: Forbidden
{{- end -}}

{{/* The requester's groups as the requester policies record them: one string, % and ,
escaped (as %25 and %2C) so that a comma in a group cannot make two. */}}
{{- define "vidra.requesterGroups" -}}
has(request.userInfo.groups) ? request.userInfo.groups.map(g, g.replace("%", "%25").replace(",", "%2C")).join(",") : ""
{{- end -}}

{{/* The requester's UID as the requester policies record it ("" when it has none). */}}
{{- define "vidra.requesterUID" -}}
has(request.userInfo.uid) ? request.userInfo.uid : ""
{{- end -}}

{{/* The requester's extra attributes as the requester policies record them: one string,
key=value,value entries joined by ";" in key order, each part escaped (%, ",", ";" and
"=" as %25, %2C, %3B and %3D) so that no separator in a name splits it. */}}
{{- define "vidra.requesterExtra" -}}
({{ include "vidra.requesterExtraEntries" . }}).sort().join(";")
{{- end -}}

{{/* The requester's extra attributes as a list of escaped key=value,value entries, in no
order: the validating policy compares them as a set, since sort() needs Kubernetes 1.34
and the validating policies are installed on older API servers too. */}}
{{- define "vidra.requesterExtraEntries" -}}
has(request.userInfo.extra) ? request.userInfo.extra.map(k, k.replace("%", "%25").replace(",", "%2C").replace(";", "%3B").replace("=", "%3D") + "=" + request.userInfo.extra[k].map(v, v.replace("%", "%25").replace(",", "%2C").replace(";", "%3B").replace("=", "%3D")).join(",")) : []
{{- end -}}

{{/* The admission policies that record and check who asks for a delivery, as
--required-admission-policies lists them: the operator refuses the bundles that rely on
them while one is missing. */}}
{{- define "vidra.requiredAdmissionPolicies" -}}
{{- $fullname := include "vidra.fullname" . -}}
validating/{{ $fullname }}-deliver,validating/{{ $fullname }}-status
{{- if .Capabilities.APIVersions.Has "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy" -}}
,mutating/{{ $fullname }}-deliver-requester
{{- end -}}
{{- end -}}

{{- /*
The rights a sync's references need, one variable per reference: Kubernetes prices an
authorizer check at 350,000 and a CEL expression may cost 1,000,000, so one expression
can ask about two names at most, while the policy as a whole may cost 10,000,000. A name
repeated is asked about once. vidra.referenceLimit refuses a sync that names more than
vidra.referenceSlots of a kind, which the policy could not check.
*/ -}}
{{- define "vidra.referenceSlots" -}}8{{- end -}}

{{- define "vidra.referenceChecks" -}}
{{- $names := printf "variables.%s" .names }}
{{- $slots := include "vidra.referenceSlots" . | int }}
{{- $refused := list }}
{{- range $i := until $slots }}
{{- $earlier := list }}
{{- range $j := until $i }}{{ $earlier = append $earlier (printf "%s[%d]" $names $j) }}{{ end -}}
- name: {{ $.names }}Refused{{ $i }}
  expression: >-
    request.operation == 'UPDATE' && object.spec == oldObject.spec || {{ $names }}.size() <= {{ $i }} ||
    {{- if $earlier }}
    {{ $names }}[{{ $i }}] in [{{ join ", " $earlier }}] ||
    {{- end }}
    authorizer.group('').resource({{ $.resource | quote }}).namespace({{ $.namespace | quote }}).name({{ $names }}[{{ $i }}]).check({{ $.verb | quote }}).allowed()
    ? [] : [{{ $names }}[{{ $i }}]]
{{ $refused = append $refused (printf "variables.%sRefused%d" $.names $i) -}}
{{ end -}}
- name: {{ if eq .kind "Secret" }}unusableSecrets{{ else }}unreadableConfigMaps{{ end }}
  expression: >-
    {{ join " + " $refused }}
{{- end -}}

{{- define "vidra.referenceLimit" -}}
{{- $names := printf "variables.%s" .names }}
{{- $slots := include "vidra.referenceSlots" . | int }}
{{- $checked := list }}
{{- range $i := until $slots }}{{ $checked = append $checked (printf "%s[%d]" $names $i) }}{{ end -}}
- expression: >-
    {{ $names }}.size() <= {{ $slots }} || {{ $names }}.all(n, n in [{{ join ", " $checked }}])
  messageExpression: >-
    'this sync names ' + string({{ $names }}.size()) + ' {{ .kind }}s: the admission policy checks the
    rights to {{ $slots }} of them at most (a name repeated among them counts once), so name no more
    than {{ $slots }} different {{ .kind }}s, each the first time among its first {{ $slots }} references'
  reason: Invalid
{{- end -}}
