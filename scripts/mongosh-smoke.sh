#!/usr/bin/env bash
# mongosh-smoke.sh URI — check that mongosh 2.x connects to a running
# mayfly the way a user would see it:
#   1. `mongosh URI --quiet --norc --eval 'db.version()'` prints 7.0.x, exit 0;
#   2. an interactive-style session (no --quiet, commands piped on stdin)
#      reaches the prompt with no warnings and no "non-genuine" banner.
# mongosh is installed once into .cache/mongosh (npm is the only network
# access it needs). Runs hermetically: HOME is a temporary directory.
set -euo pipefail

URI="${1:?usage: scripts/mongosh-smoke.sh mongodb://host:port/}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="$ROOT/.cache/mongosh"
MONGOSH="$CACHE/node_modules/.bin/mongosh"

if [[ ! -x "$MONGOSH" ]]; then
  echo "installing mongosh@2 into $CACHE" >&2
  mkdir -p "$CACHE"
  npm install --prefix "$CACHE" --no-save --loglevel=error mongosh@2 >&2
fi

TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
export HOME="$TMP" CI=1 MONGOSH_FORCE_DISABLE_TELEMETRY_FOR_TESTING=1

fail() { echo "mongosh-smoke: FAIL: $*" >&2; exit 1; }

# 1. --eval round trip.
out="$(timeout 60 "$MONGOSH" "$URI" --quiet --norc --eval 'db.version()' 2>"$TMP/eval.err")" ||
  fail "db.version() exited $? — $(cat "$TMP/eval.err")"
[[ "$out" =~ ^7\.0\.[0-9]+$ ]] || fail "db.version() printed '$out', want 7.0.x"
echo "ok: db.version() = $out"

# 2. The REPL, fed through a pipe, without --quiet (so the greeting,
#    startupWarnings and ping run) — the prompt must appear and nothing may
#    warn.
printf 'db.runCommand({ping: 1}).ok\nexit\n' |
  timeout 60 "$MONGOSH" "$URI" --norc >"$TMP/repl.out" 2>"$TMP/repl.err" ||
  fail "REPL exited $? — $(cat "$TMP/repl.out" "$TMP/repl.err")"
grep -q 'test>\|> ' "$TMP/repl.out" || fail "no prompt in: $(cat "$TMP/repl.out")"
grep -q 'Using MongoDB:[[:space:]]*7\.0\.' "$TMP/repl.out" || fail "no 'Using MongoDB: 7.0.x' greeting in: $(cat "$TMP/repl.out")"
# mongosh's own notice that this machine's Node.js is old is about the
# client, not the server: it is filtered out before looking for warnings.
cat "$TMP/repl.out" "$TMP/repl.err" |
  grep -Ev '^Deprecation warnings:$|Node\.js versions lower than|mongodb-shell/install/#supported-operating-systems' >"$TMP/repl.all" || true
if grep -Eiq 'warn|genuine|failed|error' "$TMP/repl.all"; then
  fail "REPL output has warnings: $(cat "$TMP/repl.all")"
fi
echo "ok: REPL reached the prompt with no warnings"
