// End-to-end tests of the server's life: cancelled calls, ten concurrent
// cold runs, malformed JSON-RPC on stdin, and clean exits on stdin EOF and
// SIGTERM, each time with no jail process, cgroup or state left behind.
//
// These servers run with --no-warm: with no pre-started jails, any process
// in the server's uid range is a jail that should not be there.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import { describe, test } from 'node:test';

import {
  cleanupEnv,
  collectLeftovers,
  timeoutAfter,
  describePids,
  initializeRequest,
  makeEnv,
  pidsInUidRange,
  show,
  sleep,
  spawnRaw,
  startServer,
  text,
  waitNoCgroups,
  waitNoJails,
} from './harness.mjs';

/** Waits until a jail process shows up in the range (a run has started). */
async function waitForJail(range, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const pids = pidsInUidRange(range);
    if (pids.length > 0) return pids;
    await sleep(50);
  }
  throw new Error('no jail process appeared');
}

function assertNoneLeft(how, what) {
  assert.deepEqual(how.leftJails, [], `${what}: jail processes left:\n${describePids(how.leftJails)}`);
  assert.deepEqual(how.leftCgroups, [], `${what}: jail cgroups left`);
  assert.deepEqual(how.leftState, [], `${what}: entries left in the state dir`);
  assert.deepEqual(how.leftMounts, [], `${what}: mounts left`);
  assert.deepEqual(how.leftParents ?? [], [], `${what}: cgroup_parent directories left after the cleanup`);
}

describe('cancellation and concurrency (cold jails)', () => {
  test('ten concurrent run_python calls; a cancelled call kills its jail', async (t) => {
    const srv = await startServer({ noWarm: true });
    let how;
    try {
      await t.test('ten concurrent calls all answer correctly', async () => {
        const results = await Promise.all(
          Array.from({ length: 10 }, (_, i) => srv.call('run_python', { code: `print(sum(range(${i} * 1000)))` })),
        );
        results.forEach((r, i) => {
          assert.notEqual(r.isError, true, show(r));
          assert.equal(text(r).trim(), String(((i * 1000) * (i * 1000 - 1)) / 2));
        });
        assert.deepEqual(await waitNoJails(srv.env.idRange, 5000), [], 'no jail left after the runs');
      });

      await t.test('an aborted call: its jail is killed, the server keeps answering', async () => {
        const ac = new AbortController();
        const t0 = Date.now();
        const pending = srv.call('run_python', { code: 'import time\ntime.sleep(30)\nprint("should not finish")', timeout: 30 }, { signal: ac.signal });
        const pids = await waitForJail(srv.env.idRange);
        await sleep(300);
        ac.abort('test cancels the call');
        await assert.rejects(pending, (err) => {
          assert.match(String(err?.name ?? '') + String(err?.message ?? err), /abort|cancel/i);
          return true;
        });
        const left = await waitNoJails(srv.env.idRange, 5000);
        assert.deepEqual(left, [], `jail of the cancelled call still running ${Date.now() - t0} ms after the start (was ${pids}):\n${describePids(left)}`);
        assert.deepEqual(await waitNoCgroups(srv.env.cgroupParent, 5000), [], 'the cancelled jail\'s cgroup is removed');
        const r = await srv.call('run_python', { code: 'print(1+1)' });
        assert.equal(text(r).trim(), '2');
        const { json } = await srv.readJSON('sandbox://status');
        assert.equal(json.runs_in_flight, 0, 'the jail slot was released');
      });

      await t.test('a call that times out on the client side is cancelled on the server', async () => {
        const pending = srv.call('run_python', { code: 'import time\ntime.sleep(30)', timeout: 30 }, { timeout: 1500 });
        await assert.rejects(pending, /timed out|timeout/i);
        const left = await waitNoJails(srv.env.idRange, 5000);
        assert.deepEqual(left, [], `jail left after the client's request timeout:\n${describePids(left)}`);
        const r = await srv.call('run_python', { code: '6 * 7' });
        assert.equal(r.structuredContent.value, '42');
      });

      await t.test('more cancelled calls than jail slots do not leak slots', async () => {
        const { json } = await srv.readJSON('sandbox://status');
        const n = json.max_concurrent + 2;
        const acs = Array.from({ length: n }, () => new AbortController());
        const pending = acs.map((ac) =>
          srv.call('run_python', { code: 'import time\ntime.sleep(20)', timeout: 20 }, { signal: ac.signal }).catch((e) => e),
        );
        await waitForJail(srv.env.idRange);
        await sleep(500);
        acs.forEach((ac) => ac.abort());
        await Promise.all(pending);
        assert.deepEqual(await waitNoJails(srv.env.idRange, 8000), []);
        const results = await Promise.all(Array.from({ length: json.max_concurrent }, () => srv.call('run_python', { code: 'print("free")' })));
        for (const r of results) assert.equal(text(r).trim(), 'free');
      });
    } finally {
      how = await srv.shutdown();
    }
    assertNoneLeft(how, 'after shutdown');
  });
});

describe('malformed JSON-RPC', () => {
  test('garbage on stdin gets a parse error and the server keeps serving', async () => {
    const env = makeEnv();
    const raw = spawnRaw(env, { noWarm: true });
    try {
      raw.send('{not json}');
      const parseErr = await raw.waitFor((m) => m.error);
      assert.equal(parseErr.jsonrpc, '2.0');
      assert.equal(parseErr.error.code, -32700, show(parseErr));
      assert.equal(parseErr.id ?? null, null);

      raw.send(initializeRequest(1));
      const init = await raw.waitFor((m) => m.id === 1);
      assert.ok(init.result, show(init));
      assert.equal(init.result.serverInfo.name, 'pyjail');
      assert.ok(init.result.capabilities.tools);
      raw.send({ jsonrpc: '2.0', method: 'notifications/initialized' });

      // More kinds of garbage, each answered, none fatal.
      raw.send('[1, 2');
      raw.send('{"jsonrpc": "2.0", "id": 2, "method": 5}');
      raw.send('{"jsonrpc": "2.0", "id": 3, "method": "no/such/method"}');
      raw.send('{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": "not an object"}');
      raw.send('{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "run_python", "arguments": "print(1)"}}');
      const m3 = await raw.waitFor((m) => m.id === 3);
      assert.equal(m3.error?.code, -32601, show(m3));
      const m4 = await raw.waitFor((m) => m.id === 4);
      assert.ok(m4.error || m4.result?.isError, show(m4));
      const m5 = await raw.waitFor((m) => m.id === 5);
      assert.ok(m5.error || m5.result?.isError, show(m5));

      raw.send({ jsonrpc: '2.0', id: 10, method: 'tools/call', params: { name: 'run_python', arguments: { code: 'print(1+1)' } } });
      const call = await raw.waitFor((m) => m.id === 10, 30_000);
      assert.equal(call.result?.content?.[0]?.text?.trim(), '2', show(call));
      assert.equal(raw.proc.exitCode, null, 'still running');
      assert.ok(raw.messages.every((m) => !m.unparseable), `stdout carries only JSON-RPC: ${show(raw.messages.filter((m) => m.unparseable))}`);
      // Each line that is not a request got exactly one error answer: the two
      // unparseable ones a -32700 with id null, and the request whose method
      // is not a string (valid JSON, invalid Request) -32600 with its id
      // (mcp-go alone answered it -32700 with id null; issue 11).
      const garbageAnswers = raw.messages.filter((m) => m.error && (m.id === null || m.id === undefined || m.id === 2));
      assert.equal(garbageAnswers.length, 3, `one error per garbage line: ${show(garbageAnswers)}`);
      assert.ok(garbageAnswers.filter((m) => m.id === null).every((m) => m.error.code === -32700), show(garbageAnswers));
      const m2 = garbageAnswers.find((m) => m.id === 2);
      assert.equal(m2?.error?.code, -32600, show(m2));
    } finally {
      raw.proc.stdin.end();
      const how = await Promise.race([raw.exited, timeoutAfter(5000).then(() => null)]);
      if (!how) raw.proc.kill('SIGKILL');
      assert.deepEqual(await waitNoJails(env.idRange), []);
      cleanupEnv(env);
      assert.deepEqual(how && { code: how.code, signal: how.signal }, { code: 0, signal: null }, `exit after stdin EOF; stderr:\n${raw.stderr().slice(-2000)}`);
    }
  });

  test('a request before initialize is refused, not fatal', async () => {
    const env = makeEnv();
    const raw = spawnRaw(env, { noWarm: true });
    try {
      raw.send({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
      const m = await raw.waitFor((x) => x.id === 1);
      assert.equal(m.error?.code, -32600, show(m));
      raw.send(initializeRequest(2));
      const init = await raw.waitFor((x) => x.id === 2);
      assert.ok(init.result, show(init));
    } finally {
      raw.proc.kill('SIGTERM');
      await Promise.race([raw.exited, sleep(5000)]);
      if (raw.proc.exitCode === null && raw.proc.signalCode === null) raw.proc.kill('SIGKILL');
      cleanupEnv(env);
    }
  });
});

describe('clean exit', () => {
  test('stdin EOF (client closes): exit 0 within a few seconds', async () => {
    const srv = await startServer();
    const r = await srv.call('run_python', { code: 'print(1+1)' });
    assert.equal(text(r).trim(), '2');
    const how = await srv.shutdown();
    // The SDK sends SIGTERM if the server is still there 2 s after EOF; a
    // clean EOF exit happens before that.
    assert.equal(how.signal, null, `killed by a signal: ${show(how)}`);
    assert.equal(how.code, 0, `exit code: ${show(how)}\n${srv.stderr().slice(-2000)}`);
    assert.ok(how.ms < 2000, `exited ${how.ms} ms after stdin EOF (the SDK sends SIGTERM at 2000 ms)`);
    assertNoneLeft(how, 'stdin EOF with warm pools');
  });

  test('stdin EOF while a run is in flight: exit 0, the jail is gone', async () => {
    const env = makeEnv();
    const srv = await startServer({ env, noWarm: true });
    const pending = srv.call('run_python', { code: 'import time\ntime.sleep(30)', timeout: 30 }).catch((e) => e);
    await waitForJail(env.idRange);
    const how = await srv.shutdown();
    await pending;
    assert.equal(how.code, 0, `exit: ${show(how)}\n${srv.stderr().slice(-2000)}`);
    assert.ok(how.ms < 5000, `exit took ${how.ms} ms`);
    assertNoneLeft(how, 'stdin EOF during a run');
  });

  test('SIGTERM with warm pools and a run in flight: exit 0, nothing left', async () => {
    const env = makeEnv();
    const srv = await startServer({ env });
    // Warm jails exist now (or soon); a run is in flight.
    const pending = srv.call('run_python', { code: 'import time\ntime.sleep(30)', timeout: 30 }).catch((e) => e);
    await waitForJail(env.idRange);
    await sleep(500);
    const stateEntriesBefore = fs.existsSync(env.stateDir) ? fs.readdirSync(env.stateDir) : [];
    const t0 = Date.now();
    process.kill(srv.pid, 'SIGTERM');
    const ex = await Promise.race([srv.exited, timeoutAfter(10_000).then(() => null)]);
    const ms = Date.now() - t0;
    await pending;
    await srv.client.close().catch(() => {});
    const left = await waitNoJails(env.idRange, 5000);
    const { leftCgroups: cgroups, leftState: stateLeft, leftMounts } = collectLeftovers(env);
    cleanupEnv(env);
    assert.ok(ex, `no exit within 10 s of SIGTERM\n${srv.stderr().slice(-2000)}`);
    assert.equal(ex.code, 0, `exit after SIGTERM: ${show(ex)}\n${srv.stderr().slice(-2000)}`);
    assert.ok(ms < 5000, `SIGTERM exit took ${ms} ms`);
    assert.deepEqual(left, [], `jail processes left after SIGTERM:\n${describePids(left)}`);
    assert.deepEqual(cgroups, [], 'jail cgroups left after SIGTERM');
    assert.deepEqual(stateLeft, [], `state dir entries left after SIGTERM (before: ${stateEntriesBefore})`);
    assert.deepEqual(leftMounts, [], 'mounts left after SIGTERM');
  });

  test('logs go to stderr only', async () => {
    const env = makeEnv();
    const raw = spawnRaw(env, { noWarm: true });
    try {
      raw.send(initializeRequest(1));
      await raw.waitFor((m) => m.id === 1);
      raw.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
      raw.send({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'run_python', arguments: { code: 'print(7)' } } });
      await raw.waitFor((m) => m.id === 2, 30_000);
      assert.ok(raw.messages.every((m) => m.jsonrpc === '2.0'), `only JSON-RPC on stdout: ${show(raw.messages)}`);
      assert.ok(raw.stderr().length > 0, 'the server logs something to stderr');
    } finally {
      raw.proc.stdin.end();
      await Promise.race([raw.exited, sleep(5000)]);
      if (raw.proc.exitCode === null && raw.proc.signalCode === null) raw.proc.kill('SIGKILL');
      cleanupEnv(env);
    }
  });
});
