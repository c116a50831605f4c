#!/usr/bin/env bash
# THE test command: everything CI runs, in order.
#   1. gofmt check, docker-compose.yml's compose config (when a Compose binary
#      exists)   2. go vet ./...   3. go test -race -short ./... then go test ./...
#   4. scripts/compat.sh against the freshly built binary (Go driver suite,
#      mongosh, Node.js driver; clients are installed into .cache/ once)
#   5. the benchmark smoke run, go run ./scripts/bench --small (if present)
# Counts each step as one, plus compat.sh's own count (every Go compat test
# and every client script); the last line is "N passed, N failed" and the exit
# status is non-zero if anything failed.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
start=$(date +%s)
passed=0
failed=0
failures=()
pass() { passed=$((passed + 1)); echo "PASS: $1"; }
fail() { failed=$((failed + 1)); failures+=("$1"); echo "FAIL: $1"; }
banner() { echo; echo "==== $* ($(($(date +%s) - start)) s)"; }

banner "gofmt"
unformatted=$(git ls-files -co --exclude-standard '*.go' | xargs -r gofmt -l 2>&1)
if [ -z "$unformatted" ]; then
  pass "gofmt"
else
  echo "$unformatted"
  fail "gofmt (files above need gofmt -w)"
fi

banner "docker-compose.yml (compose config)"
# Validates docker-compose.yml with whichever Compose is installed (the
# compose plugin, or Debian's docker-compose package; no Docker engine is
# needed), with the root credentials taken from the environment: the
# MAYFLY_INITDB_ROOT_* reach the server and the compat service's URI.
# Without a Compose binary the check is skipped, saying so.
compose=()
if docker compose version >/dev/null 2>&1; then
  compose=(docker compose)
elif command -v docker-compose >/dev/null 2>&1; then
  compose=(docker-compose)
fi
if [ ${#compose[@]} -eq 0 ]; then
  echo "SKIP: no docker compose / docker-compose binary (apt-get install docker-compose gives one)"
elif out=$(MAYFLY_ROOT_USERNAME=ci_root MAYFLY_ROOT_PASSWORD=ci_pw "${compose[@]}" -f docker-compose.yml config 2>&1) &&
  grep -q 'MAYFLY_INITDB_ROOT_USERNAME: ci_root' <<<"$out" &&
  grep -q 'MAYFLY_INITDB_ROOT_PASSWORD: ci_pw' <<<"$out" &&
  grep -q 'mongodb://ci_root:ci_pw@mayfly:27017/?authSource=admin' <<<"$out" &&
  grep -q -- '--auth' <<<"$out"; then
  pass "${compose[*]} config (docker-compose.yml)"
else
  echo "$out"
  fail "${compose[*]} config (docker-compose.yml rejected, or the root user does not reach both services)"
fi

banner "go vet ./..."
if go vet ./...; then pass "go vet"; else fail "go vet"; fi

banner "go test -race -short ./..."
# The race detector slows storage-heavy tests ~10x: this pass runs every
# test with -short (heavy tests trim their data sizes), the next one runs
# them at full size without the detector.
gotest() { # name, args...
  local name=$1; shift
  local log=/tmp/mayfly-gotest.$$
  go test -count=1 -timeout 10m "$@" ./... 2>&1 | tee "$log" | grep -Ev '^(=== |--- PASS|PASS$)'
  if grep -qE '^(FAIL|panic:)|^--- FAIL' "$log" || ! grep -qE '^ok ' "$log"; then fail "$name"; else pass "$name"; fi
  rm -f "$log"
}
gotest "go test -race -short ./..." -race -short

banner "go test ./... (full sizes)"
gotest "go test ./..."

banner "scripts/compat.sh (built binary, Go driver suite + mongosh + Node.js driver)"
scripts/compat.sh </dev/null 2>&1 | tee /tmp/mayfly-compat.$$
compat_rc=${PIPESTATUS[0]}
last=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' /tmp/mayfly-compat.$$ | tail -1)
rm -f /tmp/mayfly-compat.$$
if [ -n "$last" ]; then
  cp=${last%% passed*}
  cf=${last#*, }
  cf=${cf%% failed*}
  passed=$((passed + cp))
  failed=$((failed + cf))
  [ "$cf" -gt 0 ] && failures+=("scripts/compat.sh: $cf failed")
  if [ "$compat_rc" -ne 0 ] && [ "$cf" -eq 0 ]; then fail "scripts/compat.sh exited $compat_rc"; fi
else
  fail "scripts/compat.sh (no summary line, exit $compat_rc)"
fi

if [ -d scripts/bench ]; then
  banner "go run ./scripts/bench --small"
  if timeout 300 go run ./scripts/bench --small </dev/null; then pass "bench smoke run"; else fail "bench smoke run"; fi
fi

banner "done in $(($(date +%s) - start)) s"
if [ ${#failures[@]} -gt 0 ]; then
  echo "failures:"
  printf '  %s\n' "${failures[@]}"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
