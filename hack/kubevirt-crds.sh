#!/usr/bin/env bash
# Generates the KubeVirt VirtualMachine and VirtualMachineInstance CRDs that tests install
# on member clusters (KubeVirt itself cannot run here), from kubevirt.io/api, into
# internal/test/kubevirtsim/testdata/crds. Usage: hack/kubevirt-crds.sh CONTROLLER_GEN
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

controller_gen="$(realpath "${1:?usage: $0 CONTROLLER_GEN}")"
kubevirt_api_version=v1.8.0
out=internal/test/kubevirtsim/testdata/crds

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# controller-gen loads kubevirt.io/api/core/v1 through the main module, whose go.mod and
# go.sum need not list kubevirt.io/api and its imports (the CDI API, ...). A copy of them
# pins kubevirt.io/api and takes the missing requirements and checksums, so the repo's own
# go.mod and go.sum are left as they are while every other dependency keeps its version.
cp go.mod "$tmp/go.mod"
cp go.sum "$tmp/go.sum"
go mod edit -modfile="$tmp/go.mod" -require="kubevirt.io/api@$kubevirt_api_version"
mkdir "$tmp/generated"
GOFLAGS="-modfile=$tmp/go.mod -mod=mod" "$controller_gen" \
	crd:allowDangerousTypes=true paths=kubevirt.io/api/core/v1 \
	output:crd:artifacts:config="$tmp/generated"

# Keep only the VM and VMI CRDs and give them KubeVirt's versions, subresources and names.
mkdir -p "$out"
rm -f "$out"/*.yaml
go run ./hack/kubevirtcrds "$tmp/generated" "$out"
