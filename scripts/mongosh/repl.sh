#!/usr/bin/env bash
# Interactive-shell checks that a script file cannot do: the REPL fed through
# a pipe (show dbs, show collections, `it` paging), and the EJSON mongosh
# prints with --json=canonical.
#   scripts/mongosh/repl.sh MONGOSH_BIN URI
# Exits non-zero if any check fails.
set -uo pipefail
MONGOSH=$1
URI=$2
fails=0
ok() { echo "ok - $1"; }
bad() { echo "not ok - $1"; fails=$((fails + 1)); }

# 1. The REPL through stdin.
out=$(printf '%s\n' \
  'use mongosh_repl' \
  'db.dropDatabase()' \
  'for (let i = 0; i < 25; i++) { db.c.insertOne({_id: i, sq: i * i}) }' \
  'db.c.find().sort({_id: 1})' \
  'it' \
  'show dbs' \
  'show collections' \
  'db.dropDatabase()' |
  timeout 120 "$MONGOSH" "$URI" --quiet --norc 2>&1)
rc=$?
[ $rc -eq 0 ] && ok "REPL exits 0" || bad "REPL exits 0 (got $rc)"
grep -q 'Type "it" for more' <<<"$out" && ok 'find shows 20 documents then: Type "it" for more' || bad 'find prints Type "it" for more'
grep -q '_id: 19' <<<"$out" && ok 'first page ends at _id 19' || bad 'first page has _id 19'
first_page=$(sed -n '/Type "it" for more/q;p' <<<"$out")
grep -q '_id: 20' <<<"$first_page" && bad 'first page stops at 20 documents' || ok 'first page stops at 20 documents'
grep -q '_id: 24, sq: 576' <<<"$out" && ok '`it` shows the rest (_id 24, sq 576)' || bad '`it` shows the rest'
grep -Eq '(^|> )mongosh_repl +[0-9.]+ *[KMG]?i?B' <<<"$out" && ok 'show dbs lists mongosh_repl with a size' || bad 'show dbs lists mongosh_repl with a size'
grep -Eq '(^|> )c$' <<<"$out" && ok 'show collections lists c' || bad 'show collections lists c'
if grep -Eq 'MongoServerError|MongoshInternalError|Uncaught' <<<"$out"; then bad "REPL printed an error"; else ok "REPL printed no error"; fi
if [ $fails -gt 0 ]; then
  echo "---- REPL output ----"
  echo "$out"
  echo "---------------------"
fi

# 2. --json=canonical shows exact types.
want='{"_id":{"$numberInt":"1"},"i":{"$numberInt":"7"},"l":{"$numberLong":"5"},"d":{"$numberDouble":"2.5"},"dec":{"$numberDecimal":"1.10"},"dt":{"$date":{"$numberLong":"1700000000123"}},"s":"x","a":[{"$numberInt":"1"},null,true],"o":{"$oid":"5f1e2d3c4b5a69788796a5b4"},"mk":{"$minKey":1}}'
timeout 60 "$MONGOSH" "$URI" --quiet --norc --eval '
  const d = db.getSiblingDB("mongosh_json"); d.dropDatabase();
  d.c.insertOne({_id: 1, i: 7, l: NumberLong(5), d: 2.5, dec: NumberDecimal("1.10"), dt: new Date(1700000000123), s: "x", a: [1, null, true], o: ObjectId("5f1e2d3c4b5a69788796a5b4"), mk: MinKey()});' >/dev/null 2>&1
got=$(timeout 60 "$MONGOSH" "$URI" --quiet --norc --json=canonical --eval 'db.getSiblingDB("mongosh_json").c.findOne({_id: 1})' 2>&1)
norm=$(node -e 'let s="";process.stdin.on("data",c=>s+=c).on("end",()=>{try{process.stdout.write(JSON.stringify(JSON.parse(s)))}catch(e){process.stdout.write("UNPARSABLE: "+s)}})' <<<"$got")
if [ "$norm" = "$want" ]; then ok "--json=canonical findOne prints exact EJSON"; else bad "--json=canonical findOne: got $norm, want $want"; fi
timeout 60 "$MONGOSH" "$URI" --quiet --norc --eval 'db.getSiblingDB("mongosh_json").dropDatabase()' >/dev/null 2>&1

# 3. Errors come back as MongoServerError[codeName] with exit code 1.
err=$(timeout 60 "$MONGOSH" "$URI" --quiet --norc --eval 'db.getSiblingDB("mongosh_json").c.insertOne({_id: 1}); db.getSiblingDB("mongosh_json").c.insertOne({_id: 1})' 2>&1)
rc=$?
[ $rc -eq 1 ] && ok "an uncaught server error exits 1" || bad "an uncaught server error exits 1 (got $rc)"
grep -q 'MongoServerError.*E11000 duplicate key error' <<<"$err" && ok "duplicate key printed as MongoServerError E11000" || bad "duplicate key error printed: $err"
timeout 60 "$MONGOSH" "$URI" --quiet --norc --eval 'db.getSiblingDB("mongosh_json").dropDatabase()' >/dev/null 2>&1

echo "mongosh REPL/EJSON: $fails failed"
[ $fails -eq 0 ]
