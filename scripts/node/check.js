// The pass/fail harness the Node.js checks share: step runs one named check
// and prints "ok - name" or "not ok - name: error"; finish prints the tally
// and exits non-zero when a check failed.
'use strict';

let passed = 0;
let failed = 0;

async function step(name, fn) {
  try {
    await fn();
    passed++;
    console.log(`ok - ${name}`);
  } catch (e) {
    failed++;
    console.log(`not ok - ${name}: ${e && e.stack ? e.stack.split('\n').slice(0, 4).join('\n  ') : e}`);
  }
}

// finish prints `${prefix}${passed} ${noun} passed, ${failed} failed` and exits.
function finish(prefix = '', noun = 'checks') {
  console.log(`${prefix}${passed} ${noun} passed, ${failed} failed`);
  process.exit(failed === 0 ? 0 : 1);
}

module.exports = { step, finish };
