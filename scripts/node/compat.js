// Drives a MongoDB-compatible server with the official Node.js driver:
// CRUD, a cursor over several batches, bulkWrite, and a TTL collection.
//   NODE_PATH=.cache/node/node_modules node scripts/node/compat.js mongodb://127.0.0.1:27017
// Exits non-zero on any mismatch.
'use strict';

const assert = require('node:assert/strict');
const { MongoClient, MongoBulkWriteError, MongoServerError, Long } = require('mongodb');

const uri = process.argv[2] || process.env.MAYFLY_URI;
if (!uri) {
  console.error('usage: node compat.js <uri>');
  process.exit(2);
}

const { step, finish } = require('./check');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  const client = new MongoClient(uri, { serverSelectionTimeoutMS: 10000 });
  await client.connect();
  const db = client.db('node_compat');
  await db.dropDatabase();

  await step('ping', async () => {
    assert.deepEqual(await db.admin().command({ ping: 1 }), { ok: 1 });
  });

  await step('CRUD', async () => {
    const c = db.collection('crud');
    const ins = await c.insertOne({ _id: 1, name: 'a', n: 1 });
    assert.equal(ins.insertedId, 1);
    const many = await c.insertMany([{ _id: 2, n: 2 }, { _id: 3, n: 3 }, { _id: 4, n: 4 }]);
    assert.equal(many.insertedCount, 3);
    assert.deepEqual(await c.findOne({ _id: 1 }), { _id: 1, name: 'a', n: 1 });
    const upd = await c.updateMany({ n: { $gte: 3 } }, { $inc: { n: 10 } });
    assert.equal(upd.matchedCount, 2);
    assert.equal(upd.modifiedCount, 2);
    const ups = await c.updateOne({ _id: 9 }, { $set: { n: 9 } }, { upsert: true });
    assert.equal(ups.upsertedId, 9);
    assert.equal(ups.upsertedCount, 1);
    const rep = await c.replaceOne({ _id: 2 }, { replaced: true });
    assert.equal(rep.modifiedCount, 1);
    const fam = await c.findOneAndUpdate({ _id: 1 }, { $set: { name: 'b' } }, { returnDocument: 'after' });
    assert.deepEqual(fam, { _id: 1, name: 'b', n: 1 });
    assert.deepEqual(await c.find({}, { projection: { _id: 1 } }).sort({ _id: 1 }).toArray(), [{ _id: 1 }, { _id: 2 }, { _id: 3 }, { _id: 4 }, { _id: 9 }]);
    assert.equal(await c.countDocuments({ n: { $gt: 5 } }), 3);
    assert.equal(await c.estimatedDocumentCount(), 5);
    assert.deepEqual((await c.distinct('n')).sort((a, b) => a - b), [1, 9, 13, 14]);
    const del = await c.deleteMany({ n: { $gt: 10 } });
    assert.equal(del.deletedCount, 2);
    await assert.rejects(c.insertOne({ _id: 1 }), (e) => e instanceof MongoServerError && e.code === 11000);
    // int64 stays int64 when asked for.
    await c.insertOne({ _id: 'long', v: Long.fromNumber(5) });
    const raw = await c.findOne({ _id: 'long' }, { promoteLongs: false });
    assert.ok(raw.v instanceof Long, 'int64 round-trips as Long');
  });

  await step('cursor over several batches', async () => {
    const c = db.collection('cursor');
    const docs = [];
    for (let i = 0; i < 250; i++) docs.push({ _id: i, sq: i * i });
    await c.insertMany(docs);
    const cur = c.find({}).sort({ _id: 1 }).batchSize(40);
    let n = 0;
    let prev = -1;
    for await (const d of cur) {
      assert.ok(d._id > prev);
      prev = d._id;
      n++;
    }
    assert.equal(n, 250);
    const early = c.find({}).batchSize(10);
    await early.next();
    await early.close(); // killCursors
    const agg = await c.aggregate([{ $match: { sq: { $gte: 100 } } }, { $count: 'n' }]).toArray();
    assert.deepEqual(agg, [{ n: 240 }]);
  });

  await step('bulkWrite ordered and unordered', async () => {
    const c = db.collection('bulk');
    const r = await c.bulkWrite([
      { insertOne: { document: { _id: 1 } } },
      { insertOne: { document: { _id: 2 } } },
      { updateOne: { filter: { _id: 1 }, update: { $set: { a: 1 } } } },
      { replaceOne: { filter: { _id: 3 }, replacement: { r: 1 }, upsert: true } },
      { deleteOne: { filter: { _id: 2 } } },
    ]);
    assert.equal(r.insertedCount, 2);
    assert.equal(r.matchedCount, 1);
    assert.equal(r.modifiedCount, 1);
    assert.equal(r.upsertedCount, 1);
    assert.equal(r.deletedCount, 1);
    await assert.rejects(
      c.bulkWrite([{ insertOne: { document: { _id: 10 } } }, { insertOne: { document: { _id: 1 } } }, { insertOne: { document: { _id: 11 } } }], { ordered: false }),
      (e) => e instanceof MongoBulkWriteError && e.writeErrors.length === 1 && e.writeErrors[0].index === 1 && e.result.insertedCount === 2,
    );
    assert.deepEqual((await c.find().sort({ _id: 1 }).toArray()).map((d) => d._id), [1, 3, 10, 11]);
  });

  await step('TTL collection: defaultTimeToLive 1, insert, wait, gone', async () => {
    await db.createCollection('ttl', { defaultTimeToLive: 1 });
    const c = db.collection('ttl');
    const infos = await db.listCollections({ name: 'ttl' }).toArray();
    assert.equal(infos[0].options.defaultTimeToLive, 1);
    await c.insertMany([{ _id: 'goes' }, { _id: 'stays', ttl: -1 }]);
    assert.equal(await c.countDocuments({}), 2);
    const withTs = await c.findOne({ _id: 'goes' }, { projection: { _ts: 1 } });
    assert.ok(withTs._ts !== undefined, '_ts is returned when projected');
    assert.equal((await c.findOne({ _id: 'goes' }))._ts, undefined, '_ts is hidden otherwise');
    await sleep(2100);
    assert.deepEqual(await c.find().toArray(), [{ _id: 'stays', ttl: -1 }]);
    assert.equal(await c.countDocuments({}), 1);
    // An insert over the expired _id works.
    await c.insertOne({ _id: 'goes', again: true });
    assert.equal(await c.countDocuments({}), 2);
  });

  await db.dropDatabase();
  await client.close();
  finish('node driver: ', 'steps');
}

main().catch((e) => {
  console.error('node driver: fatal:', e);
  process.exit(1);
});
