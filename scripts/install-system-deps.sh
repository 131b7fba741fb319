#!/usr/bin/env bash
# System packages Podium needs: bubblewrap isolates the code sandbox.
set -euo pipefail
if command -v bwrap >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" = 0 ]; then
  SUDO=""
elif command -v sudo >/dev/null 2>&1; then
  SUDO="sudo"
else
  echo "bubblewrap is missing and this user cannot install it: ask an administrator for 'apt-get install bubblewrap'" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "bubblewrap is missing: install it with your system's package manager (package 'bubblewrap')" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y -q bubblewrap >/dev/null 2>&1 || { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q bubblewrap >/dev/null; }
command -v bwrap >/dev/null
