{{- /* SPDX-License-Identifier: Apache-2.0 */ -}}

{{/* The chart's name, for the app.kubernetes.io/name label. */}}
{{- define "ibcni.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The DaemonSet's name: the release name when it already contains the chart's name (release "ibcni"
gives "ibcni"), else RELEASE-ibcni; at most 63 characters (a label value and a DNS label).
*/}}
{{- define "ibcni.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/*
Labels that select the pods. Kept to name and instance: a DaemonSet's selector cannot change, so
nothing that changes with an upgrade may be in it.
*/}}
{{- define "ibcni.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ibcni.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/*
All labels. No helm.sh/chart or app.kubernetes.io/managed-by: the static manifest
deploy/ibcni-daemonset.yaml is this chart's output and must not claim to be managed by Helm.
*/}}
{{- define "ibcni.labels" -}}
{{ include "ibcni.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | replace "+" "_" | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/component: cni-installer
app.kubernetes.io/part-of: ibcni
{{- end -}}

{{/* The installer image: repository:tag, the tag defaulting to the chart's appVersion. */}}
{{- define "ibcni.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* Where the node's CNI bin directory appears in the container: under /host, like on the node. */}}
{{- define "ibcni.cniBinMountPath" -}}
{{- printf "/host%s" .Values.hostPaths.cniBinDir -}}
{{- end -}}

{{/* "true" when the chart writes ibcni.d/node-name (clusterIPAM.enabled), else "". */}}
{{- define "ibcni.clusterIPAM" -}}
{{- if (.Values.clusterIPAM | default dict).enabled -}}true{{- end -}}
{{- end -}}

{{/*
"true" when the chart gives the pods the kubernetes backend's ServiceAccount, RBAC and kubeconfig
(clusterIPAM.enabled and clusterIPAM.rbac), else "".
*/}}
{{- define "ibcni.clusterRBAC" -}}
{{- $c := .Values.clusterIPAM | default dict -}}
{{- if and $c.enabled $c.rbac -}}true{{- end -}}
{{- end -}}

{{/* The name of the ServiceAccount, Role, ClusterRole and bindings: the DaemonSet's. */}}
{{- define "ibcni.serviceAccountName" -}}
{{- include "ibcni.fullname" . -}}
{{- end -}}

{{/* Where the node's <cniConfDir>/ibcni.d is, as a node path. */}}
{{- define "ibcni.clusterConfDir" -}}
{{- printf "%s/ibcni.d" (.Values.hostPaths.cniConfDir | default "/etc/cni/net.d") -}}
{{- end -}}

{{/* "true" when the agent serves /metrics and /healthz to the cluster (metrics.enabled), else "". */}}
{{- define "ibcni.metrics" -}}
{{- if (.Values.metrics | default dict).enabled -}}true{{- end -}}
{{- end -}}

{{/*
ibcni-dra's DaemonSet, ServiceAccount, ClusterRole and binding: the DaemonSet's name with "-dra"
(at most 63 characters).
*/}}
{{- define "ibcni.dra.fullname" -}}
{{- printf "%s-dra" (include "ibcni.fullname" . | trunc 59 | trimSuffix "-") -}}
{{- end -}}

{{/*
Labels that select ibcni-dra's pods: another app.kubernetes.io/name than the installer's, so that
neither DaemonSet's selector (nor the PodMonitor's, nor NOTES.txt's commands) takes the other's pods.
*/}}
{{- define "ibcni.dra.selectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-dra" (include "ibcni.name" .) | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* All labels of ibcni-dra's objects (no Helm labels either: see ibcni.labels). */}}
{{- define "ibcni.dra.labels" -}}
{{ include "ibcni.dra.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | replace "+" "_" | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/component: dra-driver
app.kubernetes.io/part-of: ibcni
{{- end -}}

{{/* "true" when the chart deploys ibcni-dra (dra.enabled), else "". */}}
{{- define "ibcni.dra" -}}
{{- if (.Values.dra | default dict).enabled -}}true{{- end -}}
{{- end -}}
