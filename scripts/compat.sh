#!/usr/bin/env bash
# Runs mayfly's compatibility suites against a server:
#   scripts/compat.sh                 build ./cmd/mayfly, start it on a free port
#                                     with a temporary dbpath, test it, stop it
#   scripts/compat.sh mongodb://h:p   test the server at that URI (mayfly or mongod)
#   scripts/compat.sh --install-only  only install the clients into .cache/
#
# Suites: the Go driver suite (go test ./compat/ with MAYFLY_URI), mongosh
# (scripts/mongosh/helpers.js and the REPL/EJSON checks of repl.sh) and the
# Node.js driver (scripts/node/compat.js). Node modules go to the git-ignored
# .cache/ and are reused while their package.json is unchanged.
#
# Counts every Go test (top level) and every script as one; the last line is
# exactly "N passed, N failed"; the exit status is non-zero on any failure.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
CACHE="$ROOT/.cache"
mkdir -p "$CACHE"

passed=0
failed=0
failures=()
pass() { passed=$((passed + 1)); echo "PASS: $1"; }
fail() { failed=$((failed + 1)); failures+=("$1"); echo "FAIL: $1"; }
summary() {
  echo
  if [ ${#failures[@]} -gt 0 ]; then
    echo "compat failures:"
    printf '  %s\n' "${failures[@]}"
  fi
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit $?
}
log() { echo "== compat: $*"; }

# npm_install DIR PACKAGE_JSON MARKER: installs the dependencies of
# PACKAGE_JSON into DIR unless MARKER exists and package.json is unchanged.
npm_install() {
  local dir=$1 src=$2 marker=$3
  mkdir -p "$dir"
  if [ -e "$dir/$marker" ] && cmp -s "$src" "$dir/package.json"; then
    return 0
  fi
  log "npm install $(basename "$(dirname "$src")") into ${dir#"$ROOT"/} (once; cached)"
  cp "$src" "$dir/package.json"
  # Optional native dependencies of mongosh (kerberos, mongodb-client-encryption)
  # may fail to build here; npm drops them and that is fine.
  (cd "$dir" && npm install --no-audit --no-fund --loglevel=error) || return 1
  [ -e "$dir/$marker" ]
}

install_clients() {
  command -v node >/dev/null || { echo "node is required (Node.js >= 20.19)"; return 1; }
  command -v npm >/dev/null || { echo "npm is required"; return 1; }
  npm_install "$CACHE/node" "$ROOT/scripts/node/package.json" node_modules/mongodb/package.json || return 1
  npm_install "$CACHE/mongosh" "$ROOT/scripts/mongosh/package.json" node_modules/.bin/mongosh || return 1
}

if [ "${1:-}" = "--install-only" ]; then
  install_clients
  exit $?
fi

URI=${1:-${MAYFLY_URI:-}}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/mayfly-compat.XXXXXX")
SERVER_PID=
cleanup() {
  if [ -n "$SERVER_PID" ]; then
    kill "$SERVER_PID" 2>/dev/null
    wait "$SERVER_PID" 2>/dev/null
  fi
  rm -rf "$TMP"
}
trap cleanup EXIT

if install_clients; then
  pass "install clients (mongosh, Node.js driver)"
  have_clients=1
else
  fail "install clients (mongosh, Node.js driver)"
  have_clients=0
fi
export NODE_PATH="$CACHE/node/node_modules"
MONGOSH="$CACHE/mongosh/node_modules/.bin/mongosh"

pick_port() {
  local p i
  for i in $(seq 1 100); do
    p=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return 0
    fi
  done
  return 1
}

if [ -z "$URI" ]; then
  log "building mayfly"
  if ! go build -o "$CACHE/bin/mayfly" ./cmd/mayfly; then
    fail "build ./cmd/mayfly"
    summary
  fi
  port=$(pick_port) || { fail "find a free port"; summary; }
  "$CACHE/bin/mayfly" --bind 127.0.0.1 --port "$port" --dbpath "$TMP/data" --log-level warn >"$TMP/mayfly.log" 2>&1 &
  SERVER_PID=$!
  URI="mongodb://127.0.0.1:$port"
  log "started mayfly (pid $SERVER_PID) at $URI"
fi

# Wait for the server to answer ping.
log "waiting for $URI"
up=0
for i in $(seq 1 60); do
  if [ -n "$SERVER_PID" ] && ! kill -0 "$SERVER_PID" 2>/dev/null; then
    break
  fi
  if [ $have_clients -eq 1 ]; then
    node "$ROOT/scripts/node/ping.js" "$URI" >/dev/null 2>&1 && { up=1; break; }
  else
    host=${URI#mongodb://}
    host=${host%%/*}
    (exec 3<>"/dev/tcp/${host%:*}/${host##*:}") 2>/dev/null && { up=1; break; }
  fi
  sleep 0.5
done
if [ $up -ne 1 ]; then
  fail "server at $URI answers ping"
  [ -f "$TMP/mayfly.log" ] && tail -50 "$TMP/mayfly.log"
  summary
fi
pass "server at $URI answers ping"

# 1. The Go driver suite, every test against the external server.
log "Go driver suite (go test ./compat/) against $URI"
MAYFLY_URI="$URI" go test ./compat/ -count=1 -v -parallel 8 -timeout 900s >"$TMP/go.log" 2>&1
go_rc=$?
go_pass=$(grep -c '^--- PASS' "$TMP/go.log")
go_fail=$(grep -c '^--- FAIL' "$TMP/go.log")
go_skip=$(grep -c '^--- SKIP' "$TMP/go.log")
grep -vE '^(=== (RUN|PAUSE|CONT|NAME)|\s*--- PASS|PASS$|ok )' "$TMP/go.log" | head -300
passed=$((passed + go_pass))
failed=$((failed + go_fail))
while read -r name; do failures+=("go: $name"); done < <(grep '^--- FAIL' "$TMP/go.log" | awk '{print $3}')
if [ $go_rc -ne 0 ] && [ "$go_fail" -eq 0 ]; then
  tail -40 "$TMP/go.log"
  fail "go test ./compat/ (exit $go_rc without a failing test: build error, panic or timeout)"
fi
log "Go driver suite: $go_pass passed, $go_fail failed, $go_skip skipped"

if [ $have_clients -eq 1 ]; then
  MHOME="$TMP/home"
  mkdir -p "$MHOME"
  # 2. mongosh helpers.
  log "mongosh helpers (scripts/mongosh/helpers.js)"
  HOME="$MHOME" CI=1 MONGOSH_FORCE_DISABLE_TELEMETRY_FOR_TESTING=1 \
    timeout 300 "$MONGOSH" "$URI" --quiet --norc "$ROOT/scripts/mongosh/helpers.js" >"$TMP/mongosh.log" 2>&1
  sh_rc=$?
  grep -v '^ok - ' "$TMP/mongosh.log"
  if [ $sh_rc -eq 0 ] && grep -q 'checks passed, 0 failed' "$TMP/mongosh.log"; then
    pass "mongosh helpers.js ($(grep -c '^ok - ' "$TMP/mongosh.log") checks)"
  else
    fail "mongosh helpers.js (exit $sh_rc)"
  fi
  # 3. mongosh REPL and --json=canonical.
  log "mongosh REPL and EJSON (scripts/mongosh/repl.sh)"
  if HOME="$MHOME" CI=1 MONGOSH_FORCE_DISABLE_TELEMETRY_FOR_TESTING=1 \
    "$ROOT/scripts/mongosh/repl.sh" "$MONGOSH" "$URI"; then
    pass "mongosh repl.sh"
  else
    fail "mongosh repl.sh"
  fi
  # 4. Node.js driver.
  log "Node.js driver (scripts/node/compat.js)"
  if timeout 300 node "$ROOT/scripts/node/compat.js" "$URI"; then
    pass "node compat.js"
  else
    fail "node compat.js"
  fi
fi

summary
