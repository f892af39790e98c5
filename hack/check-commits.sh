#!/usr/bin/env bash
# Runs the commit-msg check (hack/githooks/commit-msg) on every commit since the
# convention began, so that make lint fails on a message that does not follow it. A
# clone without that commit (a shallow one) checks nothing.
set -euo pipefail

since=${1:?usage: check-commits.sh FIRST-COMMIT}
if ! git cat-file -e "$since^{commit}" 2>/dev/null; then
	echo "check-commits: $since is not in this clone; no commit checked"
	exit 0
fi
msg=$(mktemp)
trap 'rm -f "$msg"' EXIT
status=0
for c in $(git rev-list --no-merges "$since^..HEAD"); do
	git log -1 --format=%B "$c" >"$msg"
	if ! hack/githooks/commit-msg "$msg"; then
		echo "  in commit $(git log -1 --format='%h' "$c")" >&2
		status=1
	fi
done
exit $status
