#!/usr/bin/env bash
# Installs Debian's chromium package for the UI's browser test, once: nothing else
# downloads a browser. CI runs as root; elsewhere, install chromium yourself (or set
# CHROMIUM to its path).
set -euo pipefail

if [[ -n "${CHROMIUM:-}" ]] || command -v chromium >/dev/null 2>&1; then
	echo "chromium: $(command -v chromium || echo "$CHROMIUM")"
	exit 0
fi
if [[ "$(id -u)" != 0 ]]; then
	echo "chromium is not installed and this is not root: apt-get install chromium (Debian's package), or set CHROMIUM" >&2
	exit 1
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
echo "chromium: $(command -v chromium)"
