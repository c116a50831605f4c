// mongosh's replica-set helpers and transactions against a replica-set
// member (mayfly --replSet rs0). Run as
//   mongosh 'mongodb://127.0.0.1:PORT/?replicaSet=rs0' --quiet --norc scripts/mongosh/txn.js
// Prints one line per check and exits 1 if any check failed.
'use strict';

let passed = 0;
let failed = 0;
function check(cond, what, got) {
  if (cond) {
    passed++;
    print(`ok - ${what}`);
  } else {
    failed++;
    print(`not ok - ${what}${got === undefined ? '' : ': got ' + EJSON.stringify(got, { relaxed: false })}`);
  }
}
function attempt(what, fn) {
  try {
    fn();
  } catch (e) {
    failed++;
    print(`not ok - ${what}: threw ${e && e.name}: ${e && e.message}`);
  }
}

const d = db.getSiblingDB('mongosh_txn');
d.dropDatabase();

attempt('replica-set helpers', () => {
  const st = rs.status();
  check(st.set === 'rs0', 'rs.status().set', st.set);
  check(st.ok === 1 && st.members.length === 1 && st.members[0].stateStr === 'PRIMARY', 'rs.status() shows one PRIMARY', st.members);
  const conf = rs.conf();
  check(conf._id === 'rs0', 'rs.conf()._id', conf._id);
  const h = db.hello();
  check(h.setName === 'rs0', 'db.hello().setName', h.setName);
  check(h.isWritablePrimary === true && h.primary === h.me, 'db.hello() is the writable primary', h);
});

attempt('startTransaction / commitTransaction', () => {
  d.createCollection('accounts');
  d.accounts.insertOne({ _id: 'a', balance: 10 });
  const session = db.getMongo().startSession();
  const sc = session.getDatabase('mongosh_txn').accounts;
  const sl = session.getDatabase('mongosh_txn').ledger;
  session.startTransaction();
  sc.insertOne({ _id: 'b', balance: 5 });
  const u = sc.updateOne({ _id: 'a' }, { $inc: { balance: -5 } });
  check(u.matchedCount === 1 && u.modifiedCount === 1, 'updateOne in the transaction reports what it matched', u);
  sl.insertOne({ _id: 1, from: 'a', to: 'b', amount: 5 });
  check(sc.countDocuments({}) === 2, 'the transaction reads its own insert', sc.countDocuments({}));
  check(d.accounts.countDocuments({}) === 1, 'outside the transaction nothing is visible before the commit', d.accounts.countDocuments({}));
  check(d.accounts.findOne({ _id: 'a' }).balance === 10, 'outside: the update is invisible before the commit', d.accounts.findOne({ _id: 'a' }));
  const r = session.commitTransaction();
  check(r === undefined || r.ok === 1, 'commitTransaction', r);
  check(d.accounts.countDocuments({}) === 2 && d.accounts.findOne({ _id: 'a' }).balance === 5, 'committed writes visible after', d.accounts.find().toArray());
  check(d.ledger.countDocuments({}) === 1, 'the second collection\'s write committed too', d.ledger.countDocuments({}));
  session.endSession();
});

attempt('startTransaction / abortTransaction', () => {
  const session = db.getMongo().startSession();
  const sc = session.getDatabase('mongosh_txn').accounts;
  session.startTransaction({ readConcern: { level: 'snapshot' }, writeConcern: { w: 'majority' } });
  sc.insertOne({ _id: 'c', balance: 1 });
  sc.deleteOne({ _id: 'a' });
  check(sc.countDocuments({}) === 2, 'inside: one inserted, one deleted', sc.countDocuments({}));
  session.abortTransaction();
  check(d.accounts.countDocuments({ _id: 'c' }) === 0, 'abortTransaction leaves no insert', d.accounts.find().toArray());
  check(d.accounts.countDocuments({ _id: 'a' }) === 1, 'abortTransaction leaves no delete', d.accounts.find().toArray());
  session.endSession();
});

attempt('withTransaction', () => {
  const session = db.getMongo().startSession();
  const sc = session.getDatabase('mongosh_txn').accounts;
  session.withTransaction(() => {
    sc.updateOne({ _id: 'b' }, { $inc: { balance: 1 } });
  });
  check(d.accounts.findOne({ _id: 'b' }).balance === 6, 'session.withTransaction commits', d.accounts.findOne({ _id: 'b' }));
  session.endSession();
});

d.dropDatabase();
print(`mongosh txn: ${passed} checks passed, ${failed} failed`);
if (failed > 0) quit(1);
