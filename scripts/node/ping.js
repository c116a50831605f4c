// Exits 0 once the server at argv[2] answers ping (used by compat.sh to
// wait for a freshly started server).
'use strict';
const { MongoClient } = require('mongodb');
(async () => {
  const client = new MongoClient(process.argv[2], { serverSelectionTimeoutMS: 2000, connectTimeoutMS: 2000 });
  try {
    await client.db('admin').command({ ping: 1 });
    process.exit(0);
  } catch (e) {
    console.error(String(e && e.message));
    process.exit(1);
  } finally {
    await client.close().catch(() => {});
  }
})();
