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
# Then, unless MAYFLY_COMPAT_SKIP_AUTH=1, the auth pass: a second mayfly
# built from this tree with --auth (root from MAYFLY_INITDB_ROOT_USERNAME/
# _PASSWORD), the Node.js auth checks (scripts/node/auth.js: both SCRAM
# mechanisms, wrong password, a readWrite user of one database confined to
# it, creates a readWriteAnyDatabase user) and the Go suite again as that
# user (MAYFLY_COMPAT_AUTH_PASS=1: tests needing more than
# readWriteAnyDatabase skip with the privilege they need).
# Why readWriteAnyDatabase and not readWrite for the Go suite: every test
# works in its own database (cx_<TestName>, made and dropped on the fly,
# one per test) and some reach others (config.system.sessions, listDatabases,
# fixed names such as "disk" or "slowlog"); mongod's roles name one database
# each, with no wildcard, so a readWrite user would need a root connection
# granting it every test's database as the test starts. readWriteAnyDatabase
# is readWrite's actions on every normal database, the closest single role;
# auth.js checks a true readWrite user.
#
# Then the TLS pass: scripts/node/tls.js (the Node.js driver's tls=true,
# tlsCAFile, tlsCertificateKeyFile against requireTLS servers) through
# go test ./server -run TestIssue15TLSNode, which makes the CA and the
# certificates at run time (internal/testpki) and starts the servers.
#
# Then, unless MAYFLY_COMPAT_SKIP_REPL=1, the replica-set pass: a third
# mayfly from this tree with --replSet rs0, reached as
# mongodb://127.0.0.1:PORT/?replicaSet=rs0, through scripts/node/txn.js
# (withTransaction, abort, concurrent bank transfers, WriteConflict with
# TransientTransactionError, retryable writes), scripts/node/mongoose.js
# (Mongoose's connection.transaction() and session.withTransaction()) and
# scripts/mongosh/txn.js (rs.status(), rs.conf(), db.hello(), a session's
# startTransaction / commitTransaction / abortTransaction).
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
AUTH_PID=
REPL_PID=
cleanup() {
  local pid
  for pid in $SERVER_PID $AUTH_PID $REPL_PID; do
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
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
# The password stays out of the output.
SHOWN_URI=${URI/:\/\/*@/://***@}
log "waiting for $SHOWN_URI"
up=0
for i in $(seq 1 60); do
  if [ -n "$SERVER_PID" ] && ! kill -0 "$SERVER_PID" 2>/dev/null; then
    break
  fi
  if [ $have_clients -eq 1 ]; then
    node "$ROOT/scripts/node/ping.js" "$URI" >/dev/null 2>&1 && { up=1; break; }
  else
    host=${URI#mongodb://}
    host=${host%%[/?]*}
    host=${host##*@} # credentials in the URI
    (exec 3<>"/dev/tcp/${host%:*}/${host##*:}") 2>/dev/null && { up=1; break; }
  fi
  sleep 0.5
done
if [ $up -ne 1 ]; then
  fail "server at $SHOWN_URI answers ping"
  [ -f "$TMP/mayfly.log" ] && tail -50 "$TMP/mayfly.log"
  summary
fi
pass "server at $SHOWN_URI answers ping"

# go_suite LABEL URI [ENV=VALUE...]: the Go driver suite, every test against
# the server at URI; each top-level test counts once.
go_suite() {
  local label=$1 uri=$2 log="$TMP/go-$1.log"
  shift 2
  log "Go driver suite (go test ./compat/, $label) against ${uri/:\/\/*@/://***@}"
  env "$@" MAYFLY_URI="$uri" go test ./compat/ -count=1 -v -parallel 8 -timeout 900s >"$log" 2>&1
  local rc=$? np nf ns
  np=$(grep -c '^--- PASS' "$log")
  nf=$(grep -c '^--- FAIL' "$log")
  ns=$(grep -c '^--- SKIP' "$log")
  grep -vE '^(=== (RUN|PAUSE|CONT|NAME)|\s*--- PASS|PASS$|ok )' "$log" | head -300
  passed=$((passed + np))
  failed=$((failed + nf))
  while read -r name; do failures+=("go ($label): $name"); done < <(grep '^--- FAIL' "$log" | awk '{print $3}')
  if [ $rc -ne 0 ] && [ "$nf" -eq 0 ]; then
    tail -40 "$log"
    fail "go test ./compat/ ($label; exit $rc without a failing test: build error, panic or timeout)"
  fi
  log "Go driver suite ($label): $np passed, $nf failed, $ns skipped"
}

# 1. The Go driver suite.
go_suite plain "$URI"

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
  # 4b. Wire compression through the Node.js driver and mongosh
  #     (compressors= in the URI; snappy where its optional package is
  #     installed; zstd's npm package cannot be installed here).
  log "wire compression: Node.js driver and mongosh (scripts/node/compress.js)"
  comps=zlib
  [ -e "$CACHE/node/node_modules/snappy/package.json" ] && comps="zlib snappy"
  for c in $comps; do
    if timeout 120 node "$ROOT/scripts/node/compress.js" "$URI" "$c"; then
      pass "node compress.js $c"
    else
      fail "node compress.js $c"
    fi
    sep='/?'
    [[ "${URI#mongodb://}" == */* ]] && sep='?'
    [[ "$URI" == *\?* ]] && sep='&'
    out=$(HOME="$MHOME" CI=1 MONGOSH_FORCE_DISABLE_TELEMETRY_FOR_TESTING=1 timeout 120 "$MONGOSH" "$URI${sep}compressors=$c" --quiet --norc --eval "
      const f = () => db.serverStatus().network.compression['$c'].decompressor.bytesIn;
      const before = f();
      db.getSiblingDB('mongosh_compress').c.insertMany(Array.from({length: 50}, (_, i) => ({i, pad: 'compressible '.repeat(50)})));
      print(f() > before ? 'compressed' : 'NOT compressed')" 2>&1)
    if [ "$out" = compressed ]; then
      pass "mongosh compressors=$c"
    else
      echo "$out"
      fail "mongosh compressors=$c"
    fi
  done
fi

# 5. The auth pass: a second mayfly with --auth.
auth_pass() {
  local root_user=compat_root root_pwd user=compat_rw pwd bin="$CACHE/bin/mayfly-auth" aport adata="$TMP/auth-data"
  root_pwd="root-$RANDOM$RANDOM"
  pwd="rw-$RANDOM$RANDOM"
  log "auth pass: building mayfly"
  if ! go build -o "$bin" ./cmd/mayfly; then
    fail "auth pass: build ./cmd/mayfly"
    return
  fi
  aport=$(pick_port) || { fail "auth pass: find a free port"; return; }
  MAYFLY_INITDB_ROOT_USERNAME=$root_user MAYFLY_INITDB_ROOT_PASSWORD=$root_pwd \
    "$bin" --auth --bind 127.0.0.1 --port "$aport" --dbpath "$adata" --log-level warn >"$TMP/mayfly-auth.log" 2>&1 &
  AUTH_PID=$!
  local base="mongodb://127.0.0.1:$aport" up=0 i
  log "auth pass: started mayfly --auth (pid $AUTH_PID) at $base"
  for i in $(seq 1 60); do
    kill -0 "$AUTH_PID" 2>/dev/null || break
    node "$ROOT/scripts/node/ping.js" "$base" >/dev/null 2>&1 && { up=1; break; }
    sleep 0.5
  done
  if [ $up -ne 1 ]; then
    fail "auth pass: mayfly --auth at $base answers ping"
    tail -50 "$TMP/mayfly-auth.log"
    return
  fi
  log "auth pass: Node.js driver authentication (scripts/node/auth.js)"
  if timeout 120 node "$ROOT/scripts/node/auth.js" "$base" "$root_user" "$root_pwd" "$user" "$pwd"; then
    pass "node auth.js (--auth)"
  else
    fail "node auth.js (--auth)"
    return
  fi
  go_suite auth "mongodb://$user:$pwd@127.0.0.1:$aport/?authSource=admin" MAYFLY_COMPAT_AUTH_PASS=1
}
if [ "${MAYFLY_COMPAT_SKIP_AUTH:-}" = 1 ]; then
  log "auth pass skipped (MAYFLY_COMPAT_SKIP_AUTH=1)"
elif [ $have_clients -eq 1 ]; then
  auth_pass
else
  fail "auth pass (needs the Node.js driver to create its user)"
fi

# 6. The TLS pass: the Node.js driver over TLS (in-process servers with
# certificates made at run time).
tls_pass() {
  log "TLS pass: Node.js driver TLS (scripts/node/tls.js via go test ./server -run TestIssue15TLSNode)"
  if MAYFLY_REQUIRE_NODE=1 go test ./server -run '^TestIssue15TLSNode$' -count=1 -v -timeout 300s >"$TMP/tls-node.log" 2>&1; then
    grep -E '^\s*(tls_node_test\.go:[0-9]+: )?((not )?ok - |[0-9]+ checks passed)' "$TMP/tls-node.log" | sed -E 's/^\s*(tls_node_test\.go:[0-9]+: )?//'
    pass "node tls.js (requireTLS, client certificates)"
  else
    grep -vE 'logger\.go' "$TMP/tls-node.log" | tail -40
    fail "node tls.js (requireTLS, client certificates)"
  fi
}
if [ $have_clients -eq 1 ]; then
  tls_pass
else
  fail "TLS pass (needs the Node.js driver)"
fi

# 7. The replica-set pass: a mayfly with --replSet rs0; transactions and
# retryable writes through the Node.js driver, Mongoose and mongosh.
repl_pass() {
  local bin="$CACHE/bin/mayfly-repl" rport rdata="$TMP/repl-data" up=0 i base uri
  log "replica-set pass: building mayfly"
  if ! go build -o "$bin" ./cmd/mayfly; then
    fail "replica-set pass: build ./cmd/mayfly"
    return
  fi
  rport=$(pick_port) || { fail "replica-set pass: find a free port"; return; }
  "$bin" --replSet rs0 --bind 127.0.0.1 --port "$rport" --dbpath "$rdata" --log-level warn >"$TMP/mayfly-repl.log" 2>&1 &
  REPL_PID=$!
  base="mongodb://127.0.0.1:$rport"
  uri="$base/?replicaSet=rs0"
  log "replica-set pass: started mayfly --replSet rs0 (pid $REPL_PID) at $uri"
  for i in $(seq 1 60); do
    kill -0 "$REPL_PID" 2>/dev/null || break
    node "$ROOT/scripts/node/ping.js" "$uri" >/dev/null 2>&1 && { up=1; break; }
    sleep 0.5
  done
  if [ $up -ne 1 ]; then
    fail "replica-set pass: mayfly --replSet rs0 at $uri answers ping"
    tail -50 "$TMP/mayfly-repl.log"
    return
  fi
  pass "replica-set pass: mayfly --replSet rs0 at $uri answers ping"
  log "replica-set pass: Node.js driver transactions and retryable writes (scripts/node/txn.js)"
  if timeout 180 node "$ROOT/scripts/node/txn.js" "$uri"; then
    pass "node txn.js (--replSet)"
  else
    fail "node txn.js (--replSet)"
  fi
  log "replica-set pass: Mongoose transactions (scripts/node/mongoose.js)"
  if timeout 120 node "$ROOT/scripts/node/mongoose.js" "$uri"; then
    pass "node mongoose.js (--replSet)"
  else
    fail "node mongoose.js (--replSet)"
  fi
  log "replica-set pass: mongosh rs helpers and transactions (scripts/mongosh/txn.js)"
  HOME="$MHOME" CI=1 MONGOSH_FORCE_DISABLE_TELEMETRY_FOR_TESTING=1 \
    timeout 120 "$MONGOSH" "$uri" --quiet --norc "$ROOT/scripts/mongosh/txn.js" >"$TMP/mongosh-txn.log" 2>&1
  local sh_rc=$?
  grep -v '^ok - ' "$TMP/mongosh-txn.log"
  if [ $sh_rc -eq 0 ] && grep -q 'checks passed, 0 failed' "$TMP/mongosh-txn.log"; then
    pass "mongosh txn.js (--replSet; $(grep -c '^ok - ' "$TMP/mongosh-txn.log") checks)"
  else
    fail "mongosh txn.js (--replSet; exit $sh_rc)"
  fi
  kill "$REPL_PID" 2>/dev/null
  wait "$REPL_PID" 2>/dev/null
  REPL_PID=
}
if [ "${MAYFLY_COMPAT_SKIP_REPL:-}" = 1 ]; then
  log "replica-set pass skipped (MAYFLY_COMPAT_SKIP_REPL=1)"
elif [ $have_clients -eq 1 ]; then
  repl_pass
else
  fail "replica-set pass (needs the Node.js driver, Mongoose and mongosh)"
fi

summary
