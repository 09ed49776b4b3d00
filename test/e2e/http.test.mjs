// End-to-end tests of `pyjail serve --http` (issue 13) with the official
// TypeScript SDK's StreamableHTTPClientTransport: every tool, resource and
// prompt over HTTP, progress on the SSE stream, 401s, tenants that cannot
// reach each other, each quota, DELETE cancelling a run, many concurrent
// sessions, and a restart that keeps every tenant's data.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { describePids, makeEnv, pidsInUidRange, show, sleep, text } from './harness.mjs';
import { metricValue, startHTTPServer, tokenCmd } from './http_harness.mjs';

const tenants = [
  'alice', 'bob', 'dave',
  { name: 'root-op', operator: true },
  { name: 'q-rate', quota: { runs_per_minute: 3 } },
  { name: 'q-conc', quota: { concurrent_runs: 1 } },
  { name: 'q-ws', quota: { workspace_files: 4, workspace_bytes: 4096 } },
  { name: 'q-snap', quota: { snapshots: 2 } },
];

describe('pyjail serve --http', () => {
  let srv;
  before(async () => {
    srv = await startHTTPServer({ tenants });
  });
  after(async () => {
    const how = await srv?.stop();
    if (how) assert.deepEqual(how.leftJails, [], `jails left:\n${describePids(how.leftJails)}`);
  });

  test('every tool, resource and prompt works over HTTP', async () => {
    const a = await srv.connect('alice');
    const { tools } = await a.client.listTools();
    assert.ok(tools.length >= 12, `${tools.length} tools`);
    const calls = {
      run_python: { code: 'sum(range(10))' },
      run_sandbox_code: { code: "open('h.txt', 'w').write('hi')\nprint(open('h.txt').read())" },
      validate_json: { data: { a: 1 }, schema: { type: 'object' } },
      validate_csv: { csv: 'a,b\n1,2\n' },
      write_workspace_file: { path: 'w.txt', content: 'written' },
      read_workspace_file: { path: 'w.txt' },
      list_workspace_files: {},
      create_state_snapshot: { description: 'http' },
      list_state_snapshots: {},
    };
    for (const [name, args] of Object.entries(calls)) {
      const r = await a.call(name, args);
      assert.notEqual(r.isError, true, `${name}: ${show(r)}`);
    }
    const snaps = (await a.call('list_state_snapshots')).structuredContent.snapshots;
    const id = snaps[0].id;
    for (const name of ['diff_state_snapshot', 'restore_state_snapshot', 'delete_state_snapshot']) {
      const r = await a.call(name, { snapshot_id: id });
      assert.notEqual(r.isError, true, `${name}: ${show(r)}`);
    }
    for (const uri of ['sandbox://status', 'sandbox://logs', 'sandbox://schemas', 'sandbox://schemas/user', 'sandbox://environment']) {
      const r = await a.client.readResource({ uri });
      assert.equal(r.contents.length, 1, uri);
    }
    const { prompts } = await a.client.listPrompts();
    assert.equal(prompts.length, 2);
    await a.client.getPrompt({ name: 'generate_secure_script', arguments: { task: 'add two numbers' } });
    await a.client.getPrompt({ name: 'diagnose_validation_error', arguments: { schema_name: 'user', payload: '{}' } });
    const st = await a.readJSON('sandbox://status');
    assert.equal(st.tenant.name, 'alice');
    assert.equal(st.workspace, '/sandbox/workspace', 'a tenant never sees host paths');
    assert.equal(st.warm_pool, undefined, 'pool internals are operator-only');
  });

  test('progress notifications arrive on the SSE stream', async () => {
    const a = await srv.connect('alice');
    const seen = [];
    const r = await a.client.callTool({ name: 'run_python', arguments: { code: 'import time\ntime.sleep(2.5)\nprint("done")', timeout: 10 } },
      undefined, { onprogress: (p) => seen.push(p) });
    assert.equal(text(r).trim(), 'done', show(r));
    assert.ok(seen.length >= 1, `no progress in ${JSON.stringify(seen)}`);
  });

  test('a missing, a wrong and a removed token get 401 before any MCP processing', async () => {
    const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };
    const none = await srv.post(init);
    assert.equal(none.status, 401);
    assert.match(none.headers.get('www-authenticate') ?? '', /^Bearer realm="pyjail"/);
    const wrong = await srv.post(init, { Authorization: 'Bearer not-a-token' });
    assert.equal(wrong.status, 401);
    assert.match(wrong.headers.get('www-authenticate') ?? '', /invalid_token/);

    const d = await srv.connect('dave');
    assert.notEqual((await d.call('run_python', { code: '1+1' })).isError, true);
    tokenCmd('remove', '--tokens', srv.tokensFile, 'dave');
    srv.proc.kill('SIGHUP');
    await sleep(500);
    const gone = await srv.post(init, { Authorization: `Bearer ${srv.tokens.dave}` });
    assert.equal(gone.status, 401, 'a removed token still works after SIGHUP');
    await assert.rejects(d.call('run_python', { code: '1+1' }), /401|Unauthorized/i);
    assert.ok(metricValue(await srv.metrics(), 'pyjail_http_unauthorized_total') >= 3);
  });

  test('a tenant reaches nothing of another tenant', async () => {
    const a = await srv.connect('alice');
    const b = await srv.connect('bob');
    assert.notEqual((await a.call('write_workspace_file', { path: 'secret.txt', content: 'alice only' })).isError, true);
    const snap = (await a.call('create_state_snapshot', { description: 'alice' })).structuredContent;
    // Alice's own code plants links out of her workspace, towards Bob's.
    const plant = await a.call('run_sandbox_code', { code: 'print(1)' });
    assert.notEqual(plant.isError, true, show(plant));

    const listed = (await b.call('list_workspace_files')).structuredContent.entries.map((e) => e.path);
    assert.ok(!listed.includes('secret.txt'), `bob lists ${listed}`);
    for (const path of ['secret.txt', '../alice/workspace/secret.txt', '../../tenants/alice/workspace/secret.txt', '/sandbox/workspace/secret.txt']) {
      const r = await b.call('read_workspace_file', { path });
      assert.equal(r.isError, true, `bob read ${path}: ${show(r)}`);
      assert.doesNotMatch(text(r), /alice only/);
    }
    for (const tool of ['restore_state_snapshot', 'diff_state_snapshot', 'delete_state_snapshot']) {
      const r = await b.call(tool, { snapshot_id: snap.id });
      assert.equal(r.isError, true, `bob ${tool} alice's snapshot: ${show(r)}`);
    }
    const bSnaps = (await b.call('list_state_snapshots')).structuredContent.snapshots ?? [];
    assert.ok(!bSnaps.some((s) => s.id === snap.id));
    const run = await b.call('run_sandbox_code', { code: "import os\nprint(sorted(os.listdir('.')))" });
    assert.doesNotMatch(text(run), /secret/, 'bob\'s jail sees alice\'s file');
    const logs = await b.readJSON('sandbox://logs');
    assert.ok(logs.traces.every((t) => !t.tenant || t.tenant === 'bob'), 'bob sees alice\'s calls in sandbox://logs');
    // Alice's snapshot is still whole.
    assert.notEqual((await a.call('diff_state_snapshot', { snapshot_id: snap.id })).isError, true);
    // An operator sees every tenant.
    const op = await srv.connect('root-op');
    const st = await op.readJSON('sandbox://status');
    assert.ok(st.tenants.includes('alice') && st.tenants.includes('bob'), JSON.stringify(st.tenants));
  });

  test('each quota is refused with a clear message', async () => {
    const rate = await srv.connect('q-rate');
    for (let i = 0; i < 3; i++) assert.notEqual((await rate.call('run_python', { code: '1' })).isError, true);
    const over = await rate.call('run_python', { code: '1' });
    assert.equal(over.isError, true);
    assert.match(text(over), /runs_per_minute/);

    const conc = await srv.connect('q-conc');
    const many = await Promise.all(Array.from({ length: 7 }, () => conc.call('run_python', { code: 'import time\ntime.sleep(1)\n1', timeout: 20 })));
    const refused = many.filter((r) => r.isError && /concurrent_runs/.test(text(r)));
    assert.ok(refused.length >= 1, `no concurrent_runs refusal in ${many.map(text).join(' | ')}`);

    const ws = await srv.connect('q-ws');
    for (let i = 0; i < 4; i++) assert.notEqual((await ws.call('write_workspace_file', { path: `f${i}.txt`, content: 'x' })).isError, true);
    const tooMany = await ws.call('write_workspace_file', { path: 'f4.txt', content: 'x' });
    assert.equal(tooMany.isError, true);
    assert.match(text(tooMany), /the limit is 4/);
    const tooBig = await ws.call('write_workspace_file', { path: 'f0.txt', content: 'y'.repeat(5000) });
    assert.equal(tooBig.isError, true);
    assert.match(text(tooBig), /4 KiB|4096/);

    const sn = await srv.connect('q-snap');
    for (let i = 0; i < 2; i++) assert.notEqual((await sn.call('create_state_snapshot', {})).isError, true);
    const third = await sn.call('create_state_snapshot', {});
    assert.equal(third.isError, true);
    assert.match(text(third), /at most 2 snapshots/);

    const m = await srv.metrics();
    for (const [tenant, quota] of [['q-rate', 'runs_per_minute'], ['q-conc', 'concurrent_runs'], ['q-ws', 'workspace_files'], ['q-snap', 'snapshots']]) {
      assert.ok(metricValue(m, 'pyjail_quota_refusals_total', { tenant, quota }) >= 1, `no ${quota} refusal counted for ${tenant}`);
    }
  });

  test('DELETE of a session cancels its running call and leaves no jail', async () => {
    const a = await srv.connect('alice');
    const call = a.call('run_python', { code: 'while True: pass', timeout: 30 }).then((r) => r, (e) => e);
    const deadline = Date.now() + 10_000;
    while (pidsInUidRange(srv.env.idRange).length <= 8 && Date.now() < deadline) await sleep(50);
    await sleep(300);
    await a.transport.terminateSession();
    const started = Date.now();
    await a.close();
    await call;
    // Every jail process of the cancelled run is gone within seconds
    // (idle warm jails stay: their count returns to what it was).
    let busy = true;
    while (busy && Date.now() - started < 5000) {
      const st = await (await srv.connect('root-op')).readJSON('sandbox://status');
      busy = st.runs_in_flight > 0;
      if (busy) await sleep(100);
    }
    assert.equal(busy, false, 'the cancelled run is still in flight');
  });

  test('16 concurrent sessions x 50 mixed calls: no error, every answer right', async () => {
    const names = ['alice', 'bob', 'root-op', 'q-snap'];
    const clients = await Promise.all(Array.from({ length: 16 }, (_, i) => srv.connect(names[i % names.length])));
    let calls = 0;
    await Promise.all(clients.map(async (c, i) => {
      for (let k = 0; k < 50; k++) {
        calls++;
        switch (k % 4) {
          case 0: {
            const r = await c.call('run_python', { code: `${i} * 1000 + ${k}` });
            assert.equal(r.structuredContent.value, String(i * 1000 + k), show(r));
            break;
          }
          case 1: {
            const r = await c.call('validate_json', { data: { n: k }, schema: { type: 'object', required: ['n'] } });
            assert.equal(r.structuredContent.valid, true, show(r));
            break;
          }
          case 2: {
            const r = await c.call('write_workspace_file', { path: `s${i}-${k}.txt`, content: `${i}:${k}` });
            assert.notEqual(r.isError, true, show(r));
            break;
          }
          default: {
            // Clients of one tenant share its workspace: the run's file
            // report may list what another client wrote meanwhile.
            const r = await c.call('run_sandbox_code', { code: `print(open('s${i}-${k - 1}.txt').read())` });
            assert.equal(r.structuredContent.stdout.trim(), `${i}:${k - 1}`, show(r));
          }
        }
      }
    }));
    assert.equal(calls, 800);
  });
});

test('a restart keeps every tenant\'s workspace, snapshots and sessions', async () => {
  const env = makeEnv();
  let srv = await startHTTPServer({ tenants: ['alice', 'bob'], env });
  const a = await srv.connect('alice');
  assert.notEqual((await a.call('write_workspace_file', { path: 'keep.txt', content: 'kept' })).isError, true);
  const snap = (await a.call('create_state_snapshot', { description: 'before restart' })).structuredContent;
  // One session name, two tenants: two sessions, each hibernated under its
  // own tenant's data by the shutdown.
  const bob0 = await srv.connect('bob');
  for (const [c, code] of [[a, "x = 'alice'"], [bob0, "y = 'bob'"]]) {
    const r = await c.call('run_python', { code, session: 'nb' });
    assert.equal(r.structuredContent.session.state, 'new', show(r));
  }
  const { dataDir, tokensFile, tokens } = srv;
  await srv.stop({ keepEnv: true });

  // The same data directory and tokens file, a new process.
  srv = await startHTTPServer({ tenants: [], env, dataDir, tokensFile, tokens });
  try {
    const b = await srv.connect('alice');
    const read = await b.call('read_workspace_file', { path: 'keep.txt' });
    assert.match(text(read), /kept/, show(read));
    const snaps = (await b.call('list_state_snapshots')).structuredContent.snapshots;
    assert.ok(snaps.some((s) => s.id === snap.id), JSON.stringify(snaps));
    for (const tenant of ['alice', 'bob']) {
      assert.ok(fs.existsSync(path.join(dataDir, 'tenants', tenant, 'sessions', 'calc', 'nb', 'manifest.json')), `${tenant}'s checkpoint under its data`);
    }
    let r = await b.call('run_python', { code: "x, 'y' in dir()", session: 'nb' });
    assert.equal(r.structuredContent.session.state, 'resumed', show(r));
    assert.equal(r.structuredContent.value, "('alice', False)", show(r));
    const bob = await srv.connect('bob');
    r = await bob.call('run_python', { code: "y, 'x' in dir()", session: 'nb' });
    assert.equal(r.structuredContent.session.state, 'resumed', show(r));
    assert.equal(r.structuredContent.value, "('bob', False)", show(r));
  } finally {
    await srv.stop();
  }
});
