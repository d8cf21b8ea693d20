#!/usr/bin/env bash
# Installs Debian's chromium package for the dashboard's browser test
# (internal/server/dashboard_browser_test.go), which drives the system
# browser headless: no browser is downloaded by the test itself.
# Idempotent: does nothing when /usr/bin/chromium is already there.
set -euo pipefail

if [ -x /usr/bin/chromium ]; then
  echo "[chromium] $(/usr/bin/chromium --version 2>/dev/null || echo /usr/bin/chromium) already installed" >&2
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then
    sudo="sudo"
  else
    echo "[chromium] /usr/bin/chromium is missing and installing it needs root: run 'apt-get install -y chromium' as root" >&2
    exit 1
  fi
fi

export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
echo "[chromium] installed $(/usr/bin/chromium --version 2>/dev/null)" >&2
