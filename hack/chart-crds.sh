#!/usr/bin/env bash
# Writes Vidra's CRDs into the chart as templates, so that `helm upgrade` upgrades them
# (Helm never updates what a chart's crds/ holds). Each is rendered when crds.install is
# on, outside agent mode (enrollment installs a pull member's CRDs), and is kept by
# `helm uninstall` when crds.keep is on: deleting a CRD deletes every object of its kind.
# Both default to on where a release's values lack them (helm upgrade --reuse-values of
# a release from before they existed).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

out=charts/vidra/templates/crds
rm -rf "$out" && mkdir -p "$out"
for crd in config/crd/bases/*.yaml; do
	awk '
		BEGIN { print "{{- if and (dig \"install\" true (.Values.crds | default dict)) (ne .Values.mode \"agent\") }}" }
		/^---$/ && NR == 1 { next }
		{ print }
		/^  annotations:$/ && !kept {
			print "    {{- if dig \"keep\" true (.Values.crds | default dict) }}"
			print "    helm.sh/resource-policy: keep"
			print "    {{- end }}"
			kept = 1
		}
		END {
			if (!kept) { print "no metadata.annotations in " FILENAME > "/dev/stderr"; exit 1 }
			print "{{- end }}"
		}
	' "$crd" > "$out/$(basename "$crd")"
done
