// Runs a small workload through the Node.js driver over one compressor:
//   NODE_PATH=.cache/node/node_modules node scripts/node/compress.js URI zlib|snappy|zstd
// inserts 100 compressible documents, reads them back through a cursor of
// several batches, and prints "ok <count>" once serverStatus'
// network.compression counters for that compressor (read through a second,
// uncompressed client) show that the server decompressed the requests and
// compressed the replies.
'use strict';
const assert = require('node:assert/strict');
const { MongoClient } = require('mongodb');

const [uri, compressor] = process.argv.slice(2);
if (!uri || !compressor) {
  console.error('usage: node compress.js <uri> <compressor>');
  process.exit(2);
}

async function figures(plain) {
  const st = await plain.db('admin').command({ serverStatus: 1 });
  const c = st.network && st.network.compression && st.network.compression[compressor];
  assert.ok(c, `serverStatus has no network.compression.${compressor}`);
  return { out: Number(c.compressor.bytesIn), in: Number(c.decompressor.bytesIn) };
}

(async () => {
  const client = new MongoClient(uri, { compressors: [compressor], serverSelectionTimeoutMS: 5000 });
  const plain = new MongoClient(uri, { serverSelectionTimeoutMS: 5000 });
  try {
    const before = await figures(plain);
    const c = client.db('node_compress').collection(compressor);
    await c.drop().catch(() => {});
    const pad = 'a sentence that repeats and compresses well. '.repeat(20);
    const docs = Array.from({ length: 100 }, (_, i) => ({ _id: i, pad }));
    await c.insertMany(docs);
    const got = await c.find({}, { batchSize: 10 }).toArray();
    assert.equal(got.length, 100);
    assert.equal(got[99].pad, pad);
    const after = await figures(plain);
    assert.ok(after.in > before.in, `the server decompressed nothing with ${compressor}`);
    assert.ok(after.out > before.out, `the server compressed no reply with ${compressor}`);
    console.log(`ok ${got.length}`);
  } catch (e) {
    console.error(String(e && e.stack));
    process.exitCode = 1;
  } finally {
    await client.close().catch(() => {});
    await plain.close().catch(() => {});
  }
})();
