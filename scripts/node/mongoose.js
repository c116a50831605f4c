// Mongoose's transaction helpers against a replica-set member (mayfly
// --replSet rs0):
//   NODE_PATH=.cache/node/node_modules node scripts/node/mongoose.js 'mongodb://127.0.0.1:27017/?replicaSet=rs0'
// connection.transaction() and session.withTransaction() with a model,
// committing and rolling back (an error thrown inside), Model.create([...],
// {session}) in a transaction. Exits non-zero on any mismatch.
'use strict';

const assert = require('node:assert/strict');
const mongoose = require('mongoose');

const uri = process.argv[2] || process.env.MAYFLY_URI;
if (!uri) {
  console.error('usage: node mongoose.js <uri>');
  process.exit(2);
}

const { step, finish } = require('./check');

async function main() {
  const conn = await mongoose
    .createConnection(uri, { dbName: 'mongoose_txn', serverSelectionTimeoutMS: 10000, autoIndex: false })
    .asPromise();
  await conn.dropDatabase();
  const Account = conn.model('Account', new mongoose.Schema({ owner: { type: String, required: true }, balance: Number }));
  const Entry = conn.model('Entry', new mongoose.Schema({ from: String, to: String, amount: Number }));
  // Collections exist before the transactions (mongod allows creating them
  // inside one too; this keeps the checks about the transactions).
  await Account.createCollection();
  await Entry.createCollection();

  await step('connection.transaction() commits writes of two models', async () => {
    await Account.create([{ owner: 'alice', balance: 100 }, { owner: 'bob', balance: 0 }]);
    await conn.transaction(async (session) => {
      await Account.updateOne({ owner: 'alice' }, { $inc: { balance: -30 } }, { session });
      await Account.updateOne({ owner: 'bob' }, { $inc: { balance: 30 } }, { session });
      await Entry.create([{ from: 'alice', to: 'bob', amount: 30 }], { session });
      // own writes visible inside, nothing outside before the commit
      assert.equal((await Account.findOne({ owner: 'bob' }).session(session)).balance, 30);
      assert.equal((await Account.findOne({ owner: 'bob' })).balance, 0);
      assert.equal(await Entry.countDocuments(), 0);
    });
    assert.equal((await Account.findOne({ owner: 'alice' })).balance, 70);
    assert.equal((await Account.findOne({ owner: 'bob' })).balance, 30);
    assert.equal(await Entry.countDocuments({ from: 'alice', amount: 30 }), 1);
  });

  await step('an error thrown in connection.transaction() rolls everything back', async () => {
    await assert.rejects(
      conn.transaction(async (session) => {
        await Account.updateOne({ owner: 'alice' }, { $inc: { balance: -50 } }, { session });
        await Entry.create([{ from: 'alice', to: 'nobody', amount: 50 }], { session });
        throw new Error('insufficient approval');
      }),
      /insufficient approval/,
    );
    assert.equal((await Account.findOne({ owner: 'alice' })).balance, 70);
    assert.equal(await Entry.countDocuments({ to: 'nobody' }), 0);
  });

  await step('session.withTransaction() with a model: save() and Model.create([...], {session})', async () => {
    const session = await conn.startSession();
    try {
      await session.withTransaction(async () => {
        const carol = new Account({ owner: 'carol', balance: 5 });
        await carol.save({ session });
        const docs = await Account.create([{ owner: 'dave', balance: 1 }, { owner: 'erin', balance: 2 }], { session, ordered: true }); // Mongoose 8 requires ordered with a session and several documents
        assert.equal(docs.length, 2);
        assert.equal(await Account.countDocuments({}).session(session), 5);
        assert.equal(await Account.countDocuments({}), 2);
      });
    } finally {
      await session.endSession();
    }
    assert.deepEqual((await Account.find().sort({ owner: 1 }).lean()).map((d) => d.owner), ['alice', 'bob', 'carol', 'dave', 'erin']);
  });

  await step('session.withTransaction(): a throw aborts; a validation error inside aborts too', async () => {
    const session = await conn.startSession();
    try {
      await assert.rejects(
        session.withTransaction(async () => {
          await Account.create([{ owner: 'frank', balance: 9 }], { session });
          throw new Error('changed my mind');
        }),
        /changed my mind/,
      );
      await assert.rejects(
        session.withTransaction(async () => {
          await Account.create([{ owner: 'gina', balance: 9 }], { session });
          await Account.create([{ balance: 1 }], { session }); // owner is required
        }),
        (e) => e instanceof mongoose.Error.ValidationError,
      );
    } finally {
      await session.endSession();
    }
    assert.equal(await Account.countDocuments({ owner: { $in: ['frank', 'gina'] } }), 0);
  });

  await step('explicit startTransaction / abortTransaction on a Mongoose session', async () => {
    const session = await conn.startSession();
    try {
      session.startTransaction();
      await Account.create([{ owner: 'hank', balance: 1 }], { session });
      await Account.deleteOne({ owner: 'alice' }, { session });
      await session.abortTransaction();
      session.startTransaction();
      await Account.updateOne({ owner: 'bob' }, { $set: { balance: 31 } }, { session });
      await session.commitTransaction();
    } finally {
      await session.endSession();
    }
    assert.equal(await Account.countDocuments({ owner: 'hank' }), 0);
    assert.equal(await Account.countDocuments({ owner: 'alice' }), 1);
    assert.equal((await Account.findOne({ owner: 'bob' })).balance, 31);
  });

  await step('concurrent connection.transaction() on one document: conflicts retried, no increment lost', async () => {
    const Counter = conn.model('Counter', new mongoose.Schema({ _id: String, n: Number }));
    await Counter.createCollection();
    await Counter.create({ _id: 'c', n: 0 });
    let attempts = 0;
    const worker = async () => {
      for (let i = 0; i < 10; i++) {
        await conn.transaction(async (session) => {
          attempts++;
          const doc = await Counter.findById('c').session(session);
          doc.n += 1;
          await doc.save({ session });
        });
      }
    };
    await Promise.all(Array.from({ length: 5 }, worker));
    assert.equal((await Counter.findById('c')).n, 50);
    console.log(`# 50 increments in ${attempts} attempts`);
  });

  await step('transactionAsyncLocalStorage: model calls inside connection.transaction() join it without { session }', async () => {
    mongoose.set('transactionAsyncLocalStorage', true);
    try {
      await assert.rejects(
        conn.transaction(async () => {
          await Account.create([{ owner: 'ivan', balance: 3 }]);
          await Account.updateOne({ owner: 'bob' }, { $inc: { balance: 100 } });
          assert.equal(await Account.countDocuments({ owner: 'ivan' }), 1); // read in the transaction
          throw new Error('roll back');
        }),
        /roll back/,
      );
      assert.equal(await Account.countDocuments({ owner: 'ivan' }), 0);
      assert.equal((await Account.findOne({ owner: 'bob' })).balance, 31);
      await conn.transaction(async () => {
        await Account.create([{ owner: 'ivan', balance: 3 }]);
      });
      assert.equal(await Account.countDocuments({ owner: 'ivan' }), 1);
    } finally {
      mongoose.set('transactionAsyncLocalStorage', false);
    }
  });

  await conn.close();
  finish();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
