// Exercises every mongosh helper of shared/reference/mongosh-surface.md §4
// against the server mongosh is connected to. Run as
//   mongosh "$URI" --quiet --norc scripts/mongosh/helpers.js
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
function same(got, want, what) {
  const g = EJSON.stringify(got, { relaxed: false });
  const w = EJSON.stringify(want, { relaxed: false });
  check(g === w, what + (g === w ? '' : ` (want ${w})`), got);
}
// Numbers may come back as int32, int64 (Long) or double.
function num(x) {
  return x !== null && typeof x === 'object' && typeof x.toNumber === 'function' ? x.toNumber() : x;
}
function attempt(what, fn) {
  try {
    fn();
  } catch (e) {
    failed++;
    print(`not ok - ${what}: threw ${e && e.name}: ${e && e.message}`);
  }
}

const d = db.getSiblingDB('mongosh_helpers');
d.dropDatabase();

attempt('createCollection', () => {
  const r = d.createCollection('people');
  same(r, { ok: 1 }, 'createCollection returns {ok: 1}');
  let threw = null;
  try { d.createCollection('people', { defaultTimeToLive: 5 }); } catch (e) { threw = e; }
  check(threw && threw.codeName === 'NamespaceExists', 'createCollection of an existing name with other options: NamespaceExists', threw && threw.message);
});

attempt('insertOne / insertMany', () => {
  const r1 = d.people.insertOne({ name: 'ann', age: 31, tags: ['a'] });
  check(r1.acknowledged === true && r1.insertedId instanceof ObjectId, 'insertOne acknowledged with an ObjectId', r1);
  const docs = [];
  for (let i = 0; i < 30; i++) docs.push({ _id: i, n: i, even: i % 2 === 0, grp: i % 3 });
  const r2 = d.nums.insertMany(docs);
  check(r2.acknowledged === true && Object.keys(r2.insertedIds).length === 30, 'insertMany of 30', r2);
  let dup = null;
  try { d.nums.insertOne({ _id: 3 }); } catch (e) { dup = e; }
  check(dup && dup.code === 11000, 'insertOne duplicate _id: code 11000', dup && dup.message);
  let bulkErr = null;
  try { d.nums.insertMany([{ _id: 100 }, { _id: 4 }, { _id: 101 }]); } catch (e) { bulkErr = e; }
  check(bulkErr && bulkErr.name === 'MongoBulkWriteError' && bulkErr.writeErrors.length === 1 && bulkErr.result.insertedCount === 1,
    'insertMany ordered with a duplicate: MongoBulkWriteError, 1 inserted', bulkErr && bulkErr.message);
  d.nums.deleteOne({ _id: 100 });
});

attempt('show dbs / show collections (helpers)', () => {
  const dbs = db.getMongo().getDBs();
  check(dbs.databases.some((x) => x.name === 'mongosh_helpers'), 'getDBs lists mongosh_helpers', dbs);
  const names = d.getCollectionNames().sort();
  same(names, ['nums', 'people'], 'getCollectionNames');
  const infos = d.getCollectionInfos({ name: 'people' });
  check(infos.length === 1 && infos[0].type === 'collection' && infos[0].info && infos[0].idIndex, 'getCollectionInfos', infos);
});

attempt('find with sort/skip/limit, findOne', () => {
  const got = d.nums.find({ even: true }, { n: 1, _id: 0 }).sort({ n: -1 }).skip(2).limit(3).toArray();
  same(got, [{ n: 24 }, { n: 22 }, { n: 20 }], 'find().sort().skip().limit()');
  same(d.nums.find({ n: { $gte: 28 } }).sort({ _id: 1 }).toArray(), [{ _id: 28, n: 28, even: true, grp: 1 }, { _id: 29, n: 29, even: false, grp: 2 }], 'find range');
  const batches = d.nums.find().batchSize(7).toArray();
  check(batches.length === 30, 'find with batchSize 7 reads all 30 over getMore', batches.length);
  same(d.nums.findOne({ _id: 7 }), { _id: 7, n: 7, even: false, grp: 1 }, 'findOne');
  same(d.nums.findOne({ _id: 7 }, { grp: 1 }), { _id: 7, grp: 1 }, 'findOne with projection');
  check(d.nums.findOne({ _id: 'none' }) === null, 'findOne of nothing is null');
});

attempt('countDocuments / estimatedDocumentCount / count / distinct', () => {
  check(d.nums.countDocuments({ even: true }) === 15, 'countDocuments', d.nums.countDocuments({ even: true }));
  check(d.nums.countDocuments({}, { skip: 5, limit: 10 }) === 10, 'countDocuments skip/limit');
  check(d.nums.countDocuments({ n: 999 }) === 0, 'countDocuments of nothing');
  check(d.nums.estimatedDocumentCount() === 30, 'estimatedDocumentCount', d.nums.estimatedDocumentCount());
  check(d.nums.find({ grp: 0 }).count() === 10, 'find().count()');
  same(d.nums.distinct('grp').sort(), [0, 1, 2], 'distinct');
  same(d.nums.distinct('grp', { n: { $lt: 2 } }).sort(), [0, 1], 'distinct with query');
});

attempt('updateOne / updateMany / replaceOne', () => {
  const u1 = d.nums.updateOne({ _id: 1 }, { $set: { label: 'one' }, $inc: { n: 100 } });
  check(u1.matchedCount === 1 && u1.modifiedCount === 1 && u1.upsertedCount === 0 && u1.insertedId === null, 'updateOne', u1);
  const u2 = d.nums.updateMany({ grp: 2 }, { $set: { big: true } });
  check(u2.matchedCount === 10 && u2.modifiedCount === 10, 'updateMany', u2);
  const u3 = d.nums.updateOne({ _id: 'new' }, { $set: { n: -1 } }, { upsert: true });
  check(u3.upsertedCount === 1 && u3.insertedId === 'new' && u3.matchedCount === 0, 'updateOne upsert', u3);
  const u4 = d.nums.updateOne({ _id: 2 }, [{ $set: { twice: { $multiply: ['$n', 2] } } }]);
  check(u4.modifiedCount === 1 && d.nums.findOne({ _id: 2 }).twice === 4, 'update with a pipeline', u4);
  const r = d.nums.replaceOne({ _id: 'new' }, { replaced: true });
  check(r.matchedCount === 1 && r.modifiedCount === 1, 'replaceOne', r);
  same(d.nums.findOne({ _id: 'new' }), { _id: 'new', replaced: true }, 'replaceOne result');
  let bad = null;
  try { d.nums.updateOne({ _id: 1 }, { $inc: { label: 1 } }); } catch (e) { bad = e; }
  check(bad && bad.code === 14, '$inc of a string: code 14', bad && bad.message);
});

attempt('deleteOne / deleteMany', () => {
  const r1 = d.nums.deleteOne({ _id: 'new' });
  check(r1.deletedCount === 1, 'deleteOne', r1);
  const r2 = d.nums.deleteMany({ n: { $gte: 25, $lt: 100 } });
  check(r2.deletedCount === 5, 'deleteMany', r2);
});

attempt('findOneAndUpdate / findOneAndReplace / findOneAndDelete', () => {
  const before = d.nums.findOneAndUpdate({ _id: 3 }, { $set: { fam: 1 } });
  same(before, { _id: 3, n: 3, even: false, grp: 0 }, 'findOneAndUpdate returns the document before');
  const after = d.nums.findOneAndUpdate({ _id: 3 }, { $inc: { fam: 1 } }, { returnDocument: 'after', projection: { fam: 1 } });
  same(after, { _id: 3, fam: 2 }, 'findOneAndUpdate returnDocument after with projection');
  const rep = d.nums.findOneAndReplace({ _id: 3 }, { r: 1 }, { returnDocument: 'after' });
  same(rep, { _id: 3, r: 1 }, 'findOneAndReplace');
  const del = d.nums.findOneAndDelete({ _id: 3 });
  same(del, { _id: 3, r: 1 }, 'findOneAndDelete');
  check(d.nums.findOneAndDelete({ _id: 3 }) === null, 'findOneAndDelete of nothing is null');
});

attempt('aggregate', () => {
  const got = d.nums.aggregate([
    { $match: { n: { $lt: 10 } } },
    { $group: { _id: '$grp', total: { $sum: '$n' }, k: { $sum: 1 } } },
    { $sort: { _id: 1 } },
  ]).toArray();
  // n < 10 left: 0,2,4..9 (_id 1 now has n 101, _id 3 was deleted)
  same(got, [{ _id: 0, total: 15, k: 3 }, { _id: 1, total: 11, k: 2 }, { _id: 2, total: 15, k: 3 }], 'aggregate $match/$group/$sort');
  d.people.insertOne({ _id: 'p1', num: 5 });
  const lk = d.people.aggregate([{ $match: { _id: 'p1' } }, { $lookup: { from: 'nums', localField: 'num', foreignField: 'n', as: 'm' } }, { $project: { ids: '$m._id' } }]).toArray();
  same(lk, [{ _id: 'p1', ids: [5] }], 'aggregate $lookup');
});

attempt('createIndex / getIndexes / dropIndex', () => {
  check(d.nums.createIndex({ n: 1 }) === 'n_1', 'createIndex returns the name');
  check(d.nums.createIndex({ grp: 1, n: -1 }, { name: 'g', unique: false }) === 'g', 'createIndex with a name');
  const ixs = d.nums.getIndexes();
  same(ixs.map((x) => x.name), ['_id_', 'n_1', 'g'], 'getIndexes names');
  same(ixs[0], { v: 2, key: { _id: 1 }, name: '_id_' }, 'getIndexes _id_ spec');
  const dr = d.nums.dropIndex('n_1');
  check(dr.ok === 1, 'dropIndex by name', dr);
  const dr2 = d.nums.dropIndex({ grp: 1, n: -1 });
  check(dr2.ok === 1, 'dropIndex by key', dr2);
  let nf = null;
  try { d.nums.dropIndex('nope'); } catch (e) { nf = e; }
  check(nf && nf.code === 27, 'dropIndex of an unknown index: code 27', nf && nf.message);
  d.u.createIndex({ email: 1 }, { unique: true });
  d.u.insertOne({ email: 'x' });
  let dup = null;
  try { d.u.insertOne({ email: 'x' }); } catch (e) { dup = e; }
  check(dup && dup.code === 11000 && dup.keyValue && dup.keyValue.email === 'x', 'unique index violation: 11000 with keyValue', dup && dup.message);
});

attempt('explain', () => {
  const ex = d.nums.find({ n: { $gt: 5 } }).explain();
  check(ex && ex.queryPlanner && ex.queryPlanner.namespace === 'mongosh_helpers.nums', 'find().explain() queryPlanner.namespace', ex && ex.queryPlanner);
  const ex2 = d.nums.find({ n: { $gt: 5 } }).explain('executionStats');
  check(ex2 && ex2.executionStats && num(ex2.executionStats.nReturned) === d.nums.countDocuments({ n: { $gt: 5 } }), 'explain executionStats.nReturned', ex2 && ex2.executionStats);
  const ex3 = d.nums.explain().aggregate([{ $match: { n: 1 } }]);
  check(ex3 && ex3.ok === 1, 'explain().aggregate()', ex3);
});

attempt('db.stats() / db.c.stats()', () => {
  const s = d.stats();
  check(s.db === 'mongosh_helpers' && typeof num(s.objects) === 'number' && num(s.collections) >= 2 && num(s.dataSize) > 0, 'db.stats()', s);
  const cs = d.nums.stats();
  check(cs.ok === 1 && num(cs.count) === d.nums.countDocuments({}) && num(cs.size) > 0 && cs.sharded === false, 'db.c.stats() (from $collStats storageStats)', cs);
});

attempt('runCommand collMod and TTL options', () => {
  d.createCollection('ttl', { defaultTimeToLive: 60 });
  const info = d.getCollectionInfos({ name: 'ttl' })[0];
  check(info && info.options && info.options.defaultTimeToLive === 60, 'createCollection passes defaultTimeToLive through', info);
  const r = d.runCommand({ collMod: 'ttl', defaultTimeToLive: 120 });
  check(r.ok === 1, 'runCommand collMod', r);
  check(d.getCollectionInfos({ name: 'ttl' })[0].options.defaultTimeToLive === 120, 'collMod changed defaultTimeToLive');
  let bad = null;
  try { d.runCommand({ collMod: 'ttl', defaultTimeToLive: 0 }); } catch (e) { bad = e; }
  check(bad && bad.code === 2 && bad.codeName === 'BadValue', 'collMod with defaultTimeToLive 0: MongoServerError[BadValue]', bad && bad.message);
  check(d.getCollectionInfos({ name: 'ttl' })[0].options.defaultTimeToLive === 120, 'refused collMod changed nothing');
  let unknown = null;
  try { d.runCommand({ frobnicate: 1 }); } catch (e) { unknown = e; }
  check(unknown && unknown.codeName === 'CommandNotFound' && unknown.code === 59, 'unknown command: MongoServerError[CommandNotFound]', unknown && unknown.message);
});

attempt('misc: hello, version, ping, serverStatus', () => {
  check(db.hello().isWritablePrimary === true, 'db.hello()');
  check(/^\d+\.\d+/.test(db.version()), 'db.version()', db.version());
  same(db.adminCommand({ ping: 1 }), { ok: 1 }, 'adminCommand ping');
  check(typeof db.serverStatus().uptime === 'number', 'db.serverStatus()');
});

attempt('log verbosity: db.setLogLevel, db.getLogComponents', () => {
  const was = db.getLogComponents();
  const r = db.setLogLevel(2, 'query');
  check(r.ok === 1 && r.was && r.was.query.verbosity === -1, "db.setLogLevel(2, 'query') returns the old settings", r);
  db.setLogLevel(1);
  const c = db.getLogComponents();
  check(c.verbosity === 1 && c.query.verbosity === 2 && c.command.verbosity === -1, 'db.getLogComponents() shows them', c);
  let bad = null;
  try { db.setLogLevel(1, 'nosuch'); } catch (e) { bad = e; }
  check(bad !== null, 'db.setLogLevel on an unknown component fails', bad && bad.message);
  db.setLogLevel(was.verbosity);
  db.setLogLevel(-1, 'query');
  check(db.getLogComponents().query.verbosity === -1, 'settings restored');
});

attempt('drop / dropDatabase', () => {
  check(d.people.drop() === true, 'db.c.drop()');
  check(!d.getCollectionNames().includes('people'), 'dropped collection is gone');
  const r = d.dropDatabase();
  check(r.ok === 1 && r.dropped === 'mongosh_helpers', 'dropDatabase', r);
  check(!db.getMongo().getDBs().databases.some((x) => x.name === 'mongosh_helpers'), 'dropped database is not listed');
});

print(`mongosh helpers: ${passed} checks passed, ${failed} failed`);
if (failed > 0) quit(1);
