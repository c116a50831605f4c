// Runs a small workload through the Node.js driver over one compressor:
//   NODE_PATH=.cache/node/node_modules node scripts/node/compress.js URI zlib|snappy|zstd
// inserts 100 compressible documents, reads them back through a cursor of
// several batches, and prints "ok <count>". The caller checks, through
// serverStatus' network.compression counters, that the traffic went
// compressed with that compressor.
'use strict';
const assert = require('node:assert/strict');
const { MongoClient } = require('mongodb');

const [uri, compressor] = process.argv.slice(2);
if (!uri || !compressor) {
  console.error('usage: node compress.js <uri> <compressor>');
  process.exit(2);
}

(async () => {
  const client = new MongoClient(uri, { compressors: [compressor], serverSelectionTimeoutMS: 5000 });
  try {
    const c = client.db('node_compress').collection(compressor);
    await c.drop().catch(() => {});
    const pad = 'a sentence that repeats and compresses well. '.repeat(20);
    const docs = Array.from({ length: 100 }, (_, i) => ({ _id: i, pad }));
    await c.insertMany(docs);
    const got = await c.find({}, { batchSize: 10 }).toArray();
    assert.equal(got.length, 100);
    assert.equal(got[99].pad, pad);
    console.log(`ok ${got.length}`);
  } catch (e) {
    console.error(String(e && e.stack));
    process.exitCode = 1;
  } finally {
    await client.close().catch(() => {});
  }
})();
