#!/usr/bin/env bash
# Installs Codex CLI (npm package @openai/codex) for the Responses door's
# agent test (gateway/codex_test.go), which runs it headless against a
# gateway on loopback. Idempotent: does nothing when the pinned version is
# already installed. Prints the line that points the test at it:
#
#   eval "$(bash .ci/agents-codex.sh)"
#
# The version is pinned: the test scripts what the agent sends and shows,
# and a new release may change either.
set -euo pipefail

version=0.171.0
dir=${KLIQUE_TEST_AGENTS_DIR:-/tmp/agents}
bin=$dir/node_modules/.bin/codex

if [ -x "$bin" ] && "$bin" --version 2>/dev/null | grep -qx "codex-cli $version"; then
  echo "[codex] codex-cli $version already installed in $dir" >&2
else
  if ! command -v npm >/dev/null; then
    echo "[codex] npm is missing: install Node.js 18 or later (apt-get install -y nodejs npm)" >&2
    exit 1
  fi
  mkdir -p "$dir"
  npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "@openai/codex@$version" >&2
  echo "[codex] installed $("$bin" --version) in $dir" >&2
fi
echo "export KLIQUE_TEST_AGENTS_DIR=$dir"
