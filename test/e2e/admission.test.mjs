// End-to-end test of admission control (issue 11): a call's timeout bounds
// the whole call, its wait for a jail slot included. More calls than
// slots, each of which sleeps longer than the queue allows, must all be
// answered by their own deadline: ok, or verdict timeout that says why.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { makeEnv, show, startServer } from './harness.mjs';

describe('admission', () => {
  let srv;
  before(async () => {
    srv = await startServer({ env: makeEnv({ max_concurrent: 2 }), noWarm: true });
  });
  after(async () => {
    if (!srv) return;
    const how = await srv.shutdown();
    assert.deepEqual(how.leftJails, [], 'jail processes left after shutdown');
    assert.deepEqual(how.leftParents, [], 'cgroup parents left after shutdown');
  });

  test('queued calls are answered by their own deadline', async () => {
    const calls = 8;
    const timeout = 4; // seconds, for the call as a whole
    const started = Date.now();
    const answers = await Promise.all(
      Array.from({ length: calls }, (_, i) =>
        srv.call('run_sandbox_code', { code: `import time\ntime.sleep(1.5)\nprint(${i})`, timeout }).then((r) => ({ r, ms: Date.now() - started })),
      ),
    );
    let ok = 0;
    for (const { r, ms } of answers) {
      // One second of slack for the transport and a cold container start.
      assert.ok(ms <= (timeout + 1) * 1000, `answered after ${ms} ms, past its ${timeout} s timeout: ${show(r)}`);
      const rec = r.structuredContent;
      if (r.isError !== true) {
        ok++;
        continue;
      }
      assert.equal(rec.verdict, 'timeout', show(r));
      assert.match(rec.message, /waiting for a free jail|for one of 2 jail slots/, show(r));
    }
    // Two slots and 1.5 s runs: the first two rounds fit in 4 s.
    assert.ok(ok >= 2, `only ${ok} of ${calls} calls ran`);
    console.log(`# ${ok} of ${calls} calls ran; the rest were answered with verdict timeout by their deadline`);
  });
});
