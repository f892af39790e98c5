#!/usr/bin/env bash
# Fails when the generated files (deepcopy code, CRDs) differ from what `make generate`
# makes of the current sources. It compares the working tree before and after
# regenerating, so it works on uncommitted changes too; the tree is left regenerated.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

generated=(apis/v1alpha1/zz_generated.deepcopy.go config/crd/bases internal/test/kubevirtsim/testdata/crds charts/vidra/templates/crds)
before="$(mktemp -d)"
trap 'rm -rf "$before"' EXIT
for path in "${generated[@]}"; do
	mkdir -p "$before/$(dirname "$path")"
	[[ -e "$path" ]] && cp -r "$path" "$before/$path"
done

make --no-print-directory generate >/dev/null

stale=0
for path in "${generated[@]}"; do
	if ! diff -r "$before/$path" "$path" >/dev/null 2>&1; then
		echo "stale generated file(s): $path" >&2
		diff -ru "$before/$path" "$path" >&2 || true
		stale=1
	fi
done
if [[ $stale == 1 ]]; then
	echo "run 'make generate' and commit the result" >&2
	exit 1
fi
echo "generated files are current"
