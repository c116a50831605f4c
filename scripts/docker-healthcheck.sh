#!/bin/sh
# Container healthcheck for mayfly (busybox sh, nc, od, tr, grep; no client
# needed): sends one OP_MSG {ping: 1, $db: "admin"} to the local server and
# succeeds only if the reply carries ok: 1.0 (the BSON double 1.0 under "ok").
# Works against mongod too.  Usage: mayfly-healthcheck [host] [port]
host=${1:-127.0.0.1}
port=${2:-27017}
# Message: length 51, requestID 1, responseTo 0, opCode 2013 (OP_MSG),
# flagBits 0, section kind 0, then the 30-byte BSON command (octal escapes).
printf '\063\000\000\000\001\000\000\000\000\000\000\000\335\007\000\000\000\000\000\000\000\036\000\000\000\020ping\000\001\000\000\000\002$db\000\006\000\000\000admin\000\000' |
  nc -w 3 "$host" "$port" | od -An -tx1 | tr -d ' \n' | grep -q '016f6b00000000000000f03f'
