// Multi-document transactions and retryable writes through the official
// Node.js driver against a replica-set member (mayfly --replSet rs0):
//   NODE_PATH=.cache/node/node_modules node scripts/node/txn.js 'mongodb://127.0.0.1:27017/?replicaSet=rs0' [seconds [sessions]]
// withTransaction over two collections, an explicit abort, a bank-transfer
// run of concurrent sessions (the optional arguments: its length in seconds,
// 5 by default, and the number of transferring sessions, 8 by default), a
// WriteConflict between two sessions, and a retryable write. Exits non-zero
// on any mismatch.
'use strict';

const assert = require('node:assert/strict');
const { MongoClient, MongoServerError, Long } = require('mongodb');

const uri = process.argv[2] || process.env.MAYFLY_URI;
const bankSeconds = Number(process.argv[3] || 5);
const bankSessions = Number(process.argv[4] || 8);
if (!uri) {
  console.error('usage: node txn.js <uri> [seconds]');
  process.exit(2);
}

const { step, finish } = require('./check');

async function main() {
  const client = new MongoClient(uri, { serverSelectionTimeoutMS: 10000, monitorCommands: true });
  await client.connect();
  const db = client.db('node_txn');
  await db.dropDatabase();

  await step('the driver sees a replica-set primary', async () => {
    const hello = await db.admin().command({ hello: 1 });
    assert.equal(hello.setName, 'rs0');
    assert.equal(hello.isWritablePrimary, true);
    const desc = client.topology.description;
    assert.equal(desc.type, 'ReplicaSetWithPrimary');
    assert.equal(desc.setName, 'rs0');
  });

  await step('withTransaction commits writes to two collections together', async () => {
    const orders = db.collection('orders');
    const stock = db.collection('stock');
    await orders.insertOne({ _id: 0 });
    await stock.insertOne({ _id: 'book', n: 10 });
    const session = client.startSession();
    try {
      await session.withTransaction(async () => {
        await orders.insertOne({ _id: 1, item: 'book' }, { session });
        const u = await stock.updateOne({ _id: 'book' }, { $inc: { n: -1 } }, { session });
        // replies count the statement (Mongoose's save() relies on it)
        assert.equal(u.matchedCount, 1);
        assert.equal(u.modifiedCount, 1);
        const fam = await orders.findOneAndUpdate({ _id: 1 }, { $set: { qty: 1 } }, { session, returnDocument: 'after' });
        assert.deepEqual(fam, { _id: 1, item: 'book', qty: 1 });
        // own writes visible inside
        assert.equal(await orders.countDocuments({}, { session }), 2);
        assert.equal((await stock.findOne({ _id: 'book' }, { session })).n, 9);
        // nothing visible outside before the commit
        assert.equal(await orders.countDocuments({}), 1);
        assert.equal((await stock.findOne({ _id: 'book' })).n, 10);
      });
    } finally {
      await session.endSession();
    }
    assert.equal(await orders.countDocuments({}), 2);
    assert.deepEqual(await orders.findOne({ _id: 1 }), { _id: 1, item: 'book', qty: 1 });
    assert.equal((await stock.findOne({ _id: 'book' })).n, 9);
  });

  await step('abortTransaction leaves nothing; the session runs the next transaction', async () => {
    const c = db.collection('aborted');
    const session = client.startSession();
    try {
      session.startTransaction();
      await c.insertMany([{ _id: 1 }, { _id: 2 }], { session });
      await db.collection('aborted_other').insertOne({ _id: 1 }, { session });
      assert.equal(await c.countDocuments({}, { session }), 2);
      await session.abortTransaction();
      assert.equal(await c.countDocuments({}), 0);
      assert.equal(await db.collection('aborted_other').countDocuments({}), 0);
      session.startTransaction();
      await c.insertOne({ _id: 3 }, { session });
      await session.commitTransaction();
      assert.deepEqual(await c.find().toArray(), [{ _id: 3 }]);
    } finally {
      await session.endSession();
    }
  });

  await step('a throw inside withTransaction aborts it', async () => {
    const c = db.collection('thrown');
    const session = client.startSession();
    try {
      await assert.rejects(
        session.withTransaction(async () => {
          await c.insertOne({ _id: 1 }, { session });
          throw new Error('callback failed');
        }),
        /callback failed/,
      );
    } finally {
      await session.endSession();
    }
    assert.equal(await c.countDocuments({}), 0);
  });

  await step('WriteConflict (112) with TransientTransactionError between two sessions', async () => {
    const c = db.collection('conflict');
    await c.insertOne({ _id: 1, n: 0 });
    const s1 = client.startSession();
    const s2 = client.startSession();
    try {
      s1.startTransaction();
      s2.startTransaction();
      await c.updateOne({ _id: 1 }, { $inc: { n: 1 } }, { session: s1 });
      // mongod reports the conflict at the second write; a first-committer-wins
      // server may report it at the second commit. Either way: 112, labelled.
      let err;
      try {
        await c.updateOne({ _id: 1 }, { $inc: { n: 10 } }, { session: s2 });
        await s1.commitTransaction();
        await s2.commitTransaction();
      } catch (e) {
        err = e;
      }
      assert.ok(err instanceof MongoServerError, `expected a server error, got ${err}`);
      assert.equal(err.code, 112);
      assert.equal(err.codeName, 'WriteConflict');
      assert.ok(err.hasErrorLabel('TransientTransactionError'), `labels ${JSON.stringify(err.errorLabels)}`);
      if (s1.inTransaction()) await s1.commitTransaction();
      if (s2.inTransaction()) await s2.abortTransaction().catch(() => {});
      assert.equal((await c.findOne({ _id: 1 })).n, 1);
    } finally {
      await s1.endSession();
      await s2.endSession();
    }
  });

  await step(`bank transfers: ${bankSessions} concurrent withTransaction sessions for ${bankSeconds} s keep the total and reconcile with the ledger`, async () => {
    const accounts = db.collection('accounts');
    const ledger = db.collection('ledger');
    const n = 10;
    const initial = 1000;
    await accounts.insertMany(Array.from({ length: n }, (_, i) => ({ _id: i, balance: initial })));
    const deadline = Date.now() + bankSeconds * 1000;
    let transfers = 0;
    let attempts = 0;
    let seq = 0;
    let totalErr;
    const worker = async (w) => {
      const session = client.startSession();
      try {
        while (Date.now() < deadline) {
          const from = Math.floor(Math.random() * n);
          let to = Math.floor(Math.random() * (n - 1));
          if (to >= from) to++;
          const amount = 1 + Math.floor(Math.random() * 20);
          const id = `${w}-${seq++}`;
          await session.withTransaction(async () => {
            attempts++;
            const src = await accounts.findOne({ _id: from }, { session });
            if (src.balance < amount) return; // nothing to move
            await accounts.updateOne({ _id: from }, { $inc: { balance: -amount } }, { session });
            await accounts.updateOne({ _id: to }, { $inc: { balance: amount } }, { session });
            await ledger.insertOne({ _id: id, from, to, amount }, { session });
          });
          transfers++;
        }
      } finally {
        await session.endSession();
      }
    };
    // A reader checking the invariant while the transfers run (each read a
    // snapshot transaction, so it sees whole transfers only).
    const checker = async () => {
      const session = client.startSession();
      try {
        while (Date.now() < deadline) {
          await session.withTransaction(async () => {
            const docs = await accounts.find({}, { session }).toArray();
            const sum = docs.reduce((s, d) => s + d.balance, 0);
            if (sum !== n * initial && !totalErr) totalErr = new Error(`total ${sum} mid-run`);
          }, { readConcern: { level: 'snapshot' } });
          await new Promise((r) => setTimeout(r, 50));
        }
      } finally {
        await session.endSession();
      }
    };
    await Promise.all([...Array.from({ length: bankSessions }, (_, w) => worker(w)), checker()]);
    if (totalErr) throw totalErr;
    const docs = await accounts.find().sort({ _id: 1 }).toArray();
    assert.equal(docs.reduce((s, d) => s + d.balance, 0), n * initial);
    const moves = await ledger.find().toArray();
    const expected = Array(n).fill(initial);
    for (const m of moves) {
      expected[m.from] -= m.amount;
      expected[m.to] += m.amount;
    }
    assert.deepEqual(docs.map((d) => d.balance), expected);
    assert.ok(moves.length > 0, 'no transfer committed');
    assert.ok(docs.every((d) => d.balance >= 0), 'a balance went negative');
    console.log(`# ${transfers} transactions (${moves.length} transfers), ${attempts} attempts (${attempts - transfers} retried)`);
  });

  await step('retryable writes (retryWrites=true by default) succeed and apply once', async () => {
    const c = db.collection('retry');
    const hello = await db.admin().command({ hello: 1 });
    assert.ok(hello.logicalSessionTimeoutMinutes > 0, 'no logicalSessionTimeoutMinutes: the driver would not retry');
    // The driver attaches lsid + txnNumber to these (a retryable write).
    const seen = [];
    client.on('commandStarted', (ev) => {
      if (ev.commandName === 'insert' || ev.commandName === 'findAndModify' || ev.commandName === 'update') seen.push(ev.command);
    });
    const ins = await c.insertOne({ _id: 1, n: 0 });
    assert.equal(ins.insertedId, 1);
    await c.updateOne({ _id: 1 }, { $inc: { n: 1 } });
    const fam = await c.findOneAndUpdate({ _id: 1 }, { $inc: { n: 1 } }, { returnDocument: 'after' });
    assert.equal(fam.n, 2);
    assert.deepEqual(await c.find().toArray(), [{ _id: 1, n: 2 }]);
    client.removeAllListeners('commandStarted');
    assert.equal(seen.length, 3);
    for (const cmd of seen) assert.ok(cmd.lsid && cmd.txnNumber !== undefined, `not sent as a retryable write: ${JSON.stringify(cmd)}`);
    // A retried statement (same lsid and txnNumber, sent again by hand)
    // answers as the first did and is not applied twice.
    const session = client.startSession();
    try {
      const cmd = { update: 'retry', updates: [{ q: { _id: 1 }, u: { $inc: { n: 100 } } }], txnNumber: Long.fromNumber(1e9) }; // above any number the pooled server session used
      const first = await db.command({ ...cmd }, { session });
      const again = await db.command({ ...cmd }, { session });
      assert.equal(first.nModified, 1);
      assert.equal(again.nModified, 1);
      assert.equal((await c.findOne({ _id: 1 })).n, 102);
    } finally {
      await session.endSession();
    }
  });

  await client.close();
  finish();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
