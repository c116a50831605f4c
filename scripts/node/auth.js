// Authentication through the official Node.js driver against a mayfly (or
// mongod) started with --auth whose root user is known:
//   NODE_PATH=.cache/node/node_modules node scripts/node/auth.js \
//     mongodb://127.0.0.1:27017 ROOT_USER ROOT_PWD USER PWD
// Creates USER in admin with readWriteAnyDatabase (both SCRAM mechanisms,
// as createUser does by default; an existing USER is updated), then checks
// SCRAM-SHA-256 and SCRAM-SHA-1 with the right password, 18
// AuthenticationFailed with a wrong one, 13 Unauthorized without
// credentials, and a readWrite user of one database (USER_db in
// node_auth_rw) confined to it. Exits non-zero on any mismatch.
'use strict';

const assert = require('node:assert/strict');
const { MongoClient, MongoServerError } = require('mongodb');

const [base, rootUser, rootPwd, user, pwd] = process.argv.slice(2);
if (!base || !rootUser || !rootPwd || !user || !pwd) {
  console.error('usage: node auth.js mongodb://host:port ROOT_USER ROOT_PWD USER PWD');
  process.exit(2);
}

const { step, finish } = require('./check');

const opts = { serverSelectionTimeoutMS: 10000, connectTimeoutMS: 10000 };
async function withClient(options, fn) {
  const client = new MongoClient(base, { ...opts, ...options });
  try {
    return await fn(client);
  } finally {
    await client.close().catch(() => {});
  }
}
const creds = (u, p, mech) => ({ auth: { username: u, password: p }, authSource: 'admin', authMechanism: mech });

async function main() {
  await step('root creates a readWriteAnyDatabase user', async () => {
    await withClient(creds(rootUser, rootPwd, 'SCRAM-SHA-256'), async (c) => {
      const admin = c.db('admin');
      try {
        await admin.command({ createUser: user, pwd, roles: ['readWriteAnyDatabase'] });
      } catch (e) {
        if (!(e instanceof MongoServerError) || e.code !== 51003) throw e; // UserAlreadyExists
        await admin.command({ updateUser: user, pwd, roles: ['readWriteAnyDatabase'] });
      }
      const info = await admin.command({ usersInfo: user });
      assert.equal(info.users.length, 1);
      assert.deepEqual([...info.users[0].mechanisms].sort(), ['SCRAM-SHA-1', 'SCRAM-SHA-256']);
    });
  });

  for (const mech of ['SCRAM-SHA-256', 'SCRAM-SHA-1']) {
    await step(`${mech}: right password reads and writes`, async () => {
      await withClient(creds(user, pwd, mech), async (c) => {
        const st = await c.db('admin').command({ connectionStatus: 1 });
        assert.deepEqual(st.authInfo.authenticatedUsers, [{ user, db: 'admin' }]);
        const coll = c.db('node_auth').collection('c');
        await coll.deleteMany({});
        await coll.insertOne({ _id: mech, n: 1 });
        assert.deepEqual(await coll.findOne({ _id: mech }), { _id: mech, n: 1 });
        await coll.drop();
      });
    });
    await step(`${mech}: wrong password fails with AuthenticationFailed`, async () => {
      await withClient(creds(user, pwd + 'x', mech), async (c) => {
        await assert.rejects(c.db('admin').command({ ping: 1 }), (e) => {
          assert.equal(e.code, 18, String(e));
          assert.equal(e.codeName, 'AuthenticationFailed', String(e));
          return true;
        });
      });
    });
  }

  await step('readWriteAnyDatabase may not create users (13 Unauthorized)', async () => {
    await withClient(creds(user, pwd, 'SCRAM-SHA-256'), async (c) => {
      await assert.rejects(c.db('admin').command({ createUser: 'nope', pwd: 'x', roles: [] }), (e) => {
        assert.equal(e.code, 13, String(e));
        return true;
      });
    });
  });

  // A readWrite user of one database, as the "readWrite user": it
  // reads and writes there, is refused elsewhere (13), and listDatabases
  // shows it only its own database.
  const dbUser = `${user}_db`;
  await step('root creates a readWrite user of node_auth_rw', async () => {
    await withClient(creds(rootUser, rootPwd, 'SCRAM-SHA-256'), async (c) => {
      const db = c.db('node_auth_rw');
      try {
        await db.command({ createUser: dbUser, pwd, roles: ['readWrite'] });
      } catch (e) {
        if (!(e instanceof MongoServerError) || e.code !== 51003) throw e; // UserAlreadyExists
        await db.command({ updateUser: dbUser, pwd, roles: ['readWrite'] });
      }
      await c.db('node_auth_other').collection('c').insertOne({ _id: 1 }).catch((e) => {
        if (!(e instanceof MongoServerError) || e.code !== 11000) throw e;
      });
    });
  });
  await step('readWrite on node_auth_rw: reads and writes there, 13 elsewhere', async () => {
    const c = new MongoClient(base, { ...opts, auth: { username: dbUser, password: pwd }, authSource: 'node_auth_rw' });
    try {
      const coll = c.db('node_auth_rw').collection('c');
      await coll.deleteMany({});
      await coll.insertMany([{ _id: 1 }, { _id: 2 }]);
      await coll.updateOne({ _id: 1 }, { $set: { x: 1 } });
      assert.deepEqual(await coll.find().sort({ _id: 1 }).toArray(), [{ _id: 1, x: 1 }, { _id: 2 }]);
      await coll.createIndex({ x: 1 });
      for (const op of [
        () => c.db('node_auth_other').collection('c').findOne({}),
        () => c.db('node_auth_other').collection('c').insertOne({ _id: 2 }),
        () => c.db('node_auth_rw').command({ dropDatabase: 1 }),
        () => c.db('admin').command({ serverStatus: 1 }),
      ]) {
        await assert.rejects(op(), (e) => {
          assert.equal(e.code, 13, String(e));
          return true;
        });
      }
      const names = (await c.db('admin').admin().listDatabases({ nameOnly: true })).databases.map((d) => d.name);
      assert.deepEqual(names, ['node_auth_rw']);
      await coll.drop();
    } finally {
      await c.close().catch(() => {});
    }
  });

  await step('no credentials: find fails with 13 Unauthorized', async () => {
    await withClient({}, async (c) => {
      await assert.rejects(c.db('node_auth').collection('c').findOne({}), (e) => {
        assert.equal(e.code, 13, String(e));
        assert.equal(e.codeName, 'Unauthorized', String(e));
        return true;
      });
    });
  });

  finish();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
