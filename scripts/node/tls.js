// TLS through the official Node.js driver, against two servers started with
// --tlsMode requireTLS, whose CA and certificates the caller made at run
// time (server/tls_node_test.go does, with internal/testpki; nothing is
// checked in):
//   NODE_PATH=.cache/node/node_modules node scripts/node/tls.js \
//     TLS_URI MTLS_URI CA_FILE CLIENT_PEM ROGUE_CLIENT_PEM
// TLS_URI: requireTLS, no --tlsCAFile (no client certificate asked for).
// MTLS_URI: requireTLS with --tlsCAFile CA_FILE (client certificates
// required). CLIENT_PEM is a client certificate and key signed by CA_FILE,
// ROGUE_CLIENT_PEM one signed by another CA. Checks that tls=true&tlsCAFile
// connects, that a plain connection, an untrusted server certificate, a
// missing client certificate and a client certificate of another CA all
// fail. Exits non-zero on any mismatch.
'use strict';

const assert = require('node:assert/strict');
const { MongoClient } = require('mongodb');

const [tlsURI, mtlsURI, caFile, clientPem, roguePem] = process.argv.slice(2);
if (!tlsURI || !mtlsURI || !caFile || !clientPem || !roguePem) {
  console.error('usage: node tls.js TLS_URI MTLS_URI CA_FILE CLIENT_PEM ROGUE_CLIENT_PEM');
  process.exit(2);
}

const { step, finish } = require('./check');

// withParams appends URI options to a mongodb://host:port/ URI.
function withParams(uri, params) {
  const q = new URLSearchParams(params).toString();
  return uri + (uri.includes('?') ? '&' : '?') + q;
}

const timeouts = { serverSelectionTimeoutMS: '3000', connectTimeoutMS: '3000' };

async function roundTrip(uri, label) {
  const client = new MongoClient(uri);
  try {
    const coll = client.db('node_tls').collection('c');
    await coll.deleteMany({ _id: label });
    await coll.insertOne({ _id: label, via: 'tls' });
    assert.deepEqual(await coll.findOne({ _id: label }), { _id: label, via: 'tls' });
    const hello = await client.db('admin').command({ hello: 1 });
    assert.equal(hello.isWritablePrimary, true);
  } finally {
    await client.close().catch(() => {});
  }
}

async function refused(uri) {
  const client = new MongoClient(uri);
  try {
    await assert.rejects(client.db('admin').command({ ping: 1 }), (e) => {
      // Server selection gives up: the handshake or the first read failed.
      assert.match(e.name, /MongoServerSelectionError|MongoNetworkError|MongoNetworkTimeoutError/, String(e));
      return true;
    });
  } finally {
    await client.close().catch(() => {});
  }
}

async function main() {
  await step('tls=true&tlsCAFile connects, writes and reads', async () => {
    await roundTrip(withParams(tlsURI, { ...timeouts, tls: 'true', tlsCAFile: caFile }), 'tls');
  });
  await step('ssl=true (the older spelling) with tlsCAFile connects too', async () => {
    await roundTrip(withParams(tlsURI, { ...timeouts, ssl: 'true', tlsCAFile: caFile }), 'ssl');
  });
  await step('a plain connection to a requireTLS server fails', async () => {
    await refused(withParams(tlsURI, timeouts));
  });
  await step('tls=true without the CA (untrusted server certificate) fails', async () => {
    await refused(withParams(tlsURI, { ...timeouts, tls: 'true' }));
  });
  await step('tlsAllowInvalidCertificates=true accepts the untrusted certificate', async () => {
    await roundTrip(withParams(tlsURI, { ...timeouts, tls: 'true', tlsAllowInvalidCertificates: 'true' }), 'insecure');
  });
  await step('--tlsCAFile server: a client certificate of its CA connects', async () => {
    await roundTrip(withParams(mtlsURI, { ...timeouts, tls: 'true', tlsCAFile: caFile, tlsCertificateKeyFile: clientPem }), 'mtls');
  });
  await step('--tlsCAFile server: no client certificate fails', async () => {
    await refused(withParams(mtlsURI, { ...timeouts, tls: 'true', tlsCAFile: caFile }));
  });
  await step('--tlsCAFile server: a client certificate of another CA fails', async () => {
    await refused(withParams(mtlsURI, { ...timeouts, tls: 'true', tlsCAFile: caFile, tlsCertificateKeyFile: roguePem }));
  });

  finish();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
