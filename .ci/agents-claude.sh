#!/usr/bin/env bash
# CI: installs Claude Code (npm @anthropic-ai/claude-code), which the
# Messages door's agent test (gateway/messages_agent_test.go) runs
# headless, into one directory (the same as .ci/agents-codex.sh's by
# default), and prints the export the test reads, for
#
#   eval "$(bash .ci/agents-claude.sh)"
#
# Idempotent: an agent already installed at the pinned version is left as
# it is. npm's own log goes to stderr.
set -euo pipefail

dir=${KLIQUE_TEST_AGENTS_DIR:-/tmp/agents}
mkdir -p "$dir"

if ! command -v npm >/dev/null; then
  echo "[agents] npm is missing: install Node.js (apt-get install -y nodejs npm); the agent tests fail under CI=true" >&2
  exit 1
fi

# name@version of each agent; the version is pinned so that a run tests
# what the last one did.
for pkg in @anthropic-ai/claude-code@2.1.197; do
  name=${pkg%@*}
  want=${pkg##*@}
  have=$(node -p "require('$dir/node_modules/$name/package.json').version" 2>/dev/null || true)
  if [ "$have" = "$want" ]; then
    echo "[agents] $name $have already installed in $dir" >&2
    continue
  fi
  npm install --prefix "$dir" --no-fund --no-audit "$pkg" >&2
  echo "[agents] installed $name $want in $dir" >&2
done

echo "export KLIQUE_TEST_AGENTS_DIR=$dir"
