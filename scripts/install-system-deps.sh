#!/usr/bin/env bash
# System packages Podium needs: bubblewrap isolates the code sandbox. With --for-tests, also Chromium,
# which renders the HTML report in a test.
set -euo pipefail
packages=()
command -v bwrap >/dev/null 2>&1 || packages+=(bubblewrap)
if [ "${1:-}" = "--for-tests" ] && ! command -v chromium >/dev/null 2>&1; then
  packages+=(chromium)
fi
if [ ${#packages[@]} = 0 ]; then
  exit 0
fi
if [ "$(id -u)" = 0 ]; then
  SUDO=""
elif command -v sudo >/dev/null 2>&1; then
  SUDO="sudo"
else
  echo "missing system packages and this user cannot install them: ask an administrator for 'apt-get install ${packages[*]}'" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "missing system packages: install ${packages[*]} with your system's package manager" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y -q "${packages[@]}" >/dev/null 2>&1 || {
  $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q "${packages[@]}" >/dev/null
}
command -v bwrap >/dev/null
