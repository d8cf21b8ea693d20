#!/usr/bin/env bash
# Run every native Go fuzz target (func FuzzX(f *testing.F) in a _test.go
# file) for FUZZTIME each. Targets are found, not listed: a new one runs
# without a change here. Each package's test binary is built once, with
# the fuzzer's instrumentation (in the background, while the packages
# before it fuzz), and runs each of its targets in turn from
# the package's directory, so that an input that fails is written to
# <package>/testdata/fuzz/<FuzzName>/: commit it, and `go test` runs it as
# a regression test from then on (it runs every file there).
#
#   FUZZTIME=30s          how long each target runs (default 30s)
#   FUZZ='gateway/wire'   only the targets whose "package name" matches
#   FUZZMINIMIZETIME=10s  how long a failing input is minimized
#
# Every target runs even after one fails; then the failures are listed and
# the script exits 1. A bare "context deadline exceeded" with no failing
# input (Go's own race at the -fuzztime deadline, go.dev/issue/75804) is
# not a failure once the target's corpus replays clean.
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZTIME=${FUZZTIME:-30s}
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-10s}
GO=${GO:-go}
module=$($GO list -m)
cache="$($GO env GOCACHE)/fuzz/$module"
work=$(mktemp -d)
builder=""
# The builder has usually finished by then: a failed kill is not a failure.
trap '[ -z "$builder" ] || kill "$builder" 2>/dev/null || true; rm -rf "$work"' EXIT

# "package-dir FuzzName" for every target, in a stable order.
targets=$(git grep --untracked -noE '^func Fuzz[A-Z][A-Za-z0-9_]*\(' -- '*_test.go' |
  sed -E 's#^(([^:]*)/)?[^/:]*_test\.go:[0-9]+:func (Fuzz[A-Za-z0-9_]+)\($#\2 \3#; s#^ #. #' | sort -u)
if [ -n "${FUZZ:-}" ]; then
  targets=$(grep -E "$FUZZ" <<< "$targets" || true)
fi
if [ -z "$targets" ]; then
  echo "[fuzz] no fuzz target${FUZZ:+ matches $FUZZ}" >&2
  exit 1
fi

bin_of() { echo "$work/$(tr '/.' '__' <<< "$1").test"; }

# The packages' test binaries are built one after another in the
# background while the targets of those built before them run: a target
# runs for FUZZTIME whatever else the machine does, so building alongside
# saves the build time from the total.
start=$SECONDS
(
  for dir in $(awk '{print $1}' <<< "$targets" | uniq); do
    b=$(bin_of "$dir")
    t0=$SECONDS
    if $GO test -c -fuzz=Fuzz -o "$b" "./$dir" > "$b.log" 2>&1; then
      echo $((SECONDS - t0)) > "$b.ok"
    else
      touch "$b.fail"
    fi
  done
) &
builder=$!

failed=()
ran=0
built=""
while read -r dir name; do
  test_bin=$(bin_of "$dir")
  if [ "$built" != "$dir" ]; then
    built=$dir
    while [ ! -e "$test_bin.ok" ] && [ ! -e "$test_bin.fail" ]; do sleep 0.2; done
    if [ -e "$test_bin.fail" ]; then
      cat "$test_bin.log" >&2
      failed+=("./$dir (does not build)")
      continue
    fi
    echo "[fuzz] built ./$dir in $(cat "$test_bin.ok")s" >&2
  fi
  [ -x "$test_bin" ] || continue
  ran=$((ran + 1))
  t0=$SECONDS
  if (cd "$dir" && "$test_bin" -test.run '^$' -test.fuzz "^${name}\$" -test.fuzztime "$FUZZTIME" \
      -test.fuzzminimizetime "$FUZZMINIMIZETIME" -test.fuzzcachedir "$cache/${dir#./}") > "$work/run.log" 2>&1; then
    execs=$(grep -oE 'execs: [0-9]+' "$work/run.log" | tail -1 || true)
    echo "[fuzz] ok   $name (./$dir) $((SECONDS - t0))s, ${execs:-no execs}" >&2
  elif ! grep -q 'Failing input written to' "$work/run.log" && grep -q '^    context deadline exceeded$' "$work/run.log" &&
      (cd "$dir" && "$test_bin" -test.run "^${name}\$") > "$work/replay.log" 2>&1; then
    # Go's fuzzing coordinator can report its own -fuzztime deadline as a
    # failure when a worker is slow to stop (go.dev/issue/75804, fixed in
    # Go 1.27): no input failed, and the corpus replays clean.
    echo "[fuzz] ok   $name (./$dir) $((SECONDS - t0))s: the fuzzer stopped late at its deadline (go.dev/issue/75804); nothing failed, corpus replays clean" >&2
  else
    cat "$work/run.log" >&2
    echo "[fuzz] FAIL $name (./$dir): the failing input is under $dir/testdata/fuzz/$name/; fix the code and commit it as a regression test" >&2
    failed+=("$name (./$dir)")
  fi
done <<< "$targets"

echo "[fuzz] $ran targets for $FUZZTIME each in $((SECONDS - start))s" >&2
if [ ${#failed[@]} -gt 0 ]; then
  printf '[fuzz] failed: %s\n' "${failed[@]}" >&2
  exit 1
fi
