// End-to-end tests of the resources and prompts of SPEC §5 through the
// official MCP client.

import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';

import { describePids, show, startServer, text } from './harness.mjs';

let srv;
before(async () => {
  srv = await startServer();
});
after(async () => {
  if (!srv) return;
  const how = await srv.shutdown();
  assert.deepEqual(how.leftJails, [], `jail processes left:\n${describePids(how.leftJails)}`);
});

describe('resources', () => {
  test('resources/list and templates', async () => {
    const { resources } = await srv.client.listResources();
    const uris = resources.map((r) => r.uri).sort();
    for (const u of ['sandbox://environment', 'sandbox://logs', 'sandbox://schemas', 'sandbox://status']) {
      assert.ok(uris.includes(u), `${u} listed: ${uris}`);
    }
    for (const r of resources) assert.equal(r.mimeType, 'application/json', r.uri);
    const { resourceTemplates } = await srv.client.listResourceTemplates();
    assert.ok(resourceTemplates.some((t) => t.uriTemplate === 'sandbox://schemas/{name}'), show(resourceTemplates));
  });

  test('sandbox://status: version, profiles, limits, and every required layer active', async () => {
    const { json: st, raw } = await srv.readJSON('sandbox://status');
    assert.equal(raw.contents[0].uri, 'sandbox://status');
    assert.equal(raw.contents[0].mimeType, 'application/json');
    assert.equal(typeof st.version, 'string');
    assert.ok(st.version.length > 0);
    assert.equal(st.ready, true, `server not ready: ${st.refusal}`);
    assert.equal(st.workspace, srv.env.workspace);
    assert.equal(st.snapshots.enabled, true);
    assert.equal(typeof st.snapshots.count, 'number');
    assert.ok(st.max_concurrent >= 1);

    for (const p of ['calc', 'workspace']) {
      const prof = st.profiles[p];
      assert.ok(prof, `profile ${p}: ${show(st.profiles)}`);
      assert.equal(prof.tool, p === 'calc' ? 'run_python' : 'run_sandbox_code');
      assert.ok(prof.limits, `${p} limits`);
      assert.ok(prof.summary.memory.includes('256 MiB'), `${p} memory: ${prof.summary.memory}`);
      assert.match(prof.summary.timeout, /^5s\b.*\b(60s|1m0s)\b/);
      assert.equal(prof.summary.network, 'none');
    }
    assert.equal(st.profiles.workspace.workspace, true);
    assert.equal(st.profiles.calc.workspace, false);

    const iso = st.isolation;
    assert.ok(Array.isArray(iso.layers) && iso.layers.length > 0, 'layers listed');
    const names = iso.layers.map((l) => l.name);
    for (const l of iso.layers) {
      assert.equal(typeof l.name, 'string');
      assert.equal(typeof l.active, 'boolean');
      assert.equal(typeof l.required, 'boolean');
      if (l.required) assert.equal(l.active, true, `required layer ${l.name} inactive: ${l.detail} ${l.fix}`);
    }
    // The layers SPEC §5 names: namespaces, cgroup, seccomp, no_new_privs, Landlock.
    for (const want of [/user/, /mount|mnt/, /pid/, /net/, /ipc/, /uts/, /cgroup/, /seccomp/, /no_new_privs|nnp/, /landlock/i]) {
      assert.ok(names.some((n) => want.test(n)), `a layer matching ${want} in ${names}`);
    }
    assert.deepEqual(iso.missing_required, []);
    assert.match(iso.cgroup_version, /^(v1|v2|hybrid)$/);
    assert.ok(Array.isArray(iso.controllers) && iso.controllers.includes('memory') && iso.controllers.includes('pids'), show(iso.controllers));
    assert.equal(typeof iso.kernel, 'string');
  });

  test('sandbox://logs: a trace with tool and verdict, never the code', async () => {
    const marker = `e2e_marker_${randomBytes(6).toString('hex')}`;
    const r = await srv.call('run_python', { code: `# ${marker}\n${marker} = 40\nprint(${marker} + 2)` });
    assert.equal(text(r).trim(), '42');
    // The marker is only in the code (a comment, a name, an unprinted
    // string), never in what the program prints or raises.
    const e = await srv.call('run_python', { code: `# ${marker}_err\nunused = "${marker}_str"\nraise ValueError("boom")` });
    assert.equal(e.isError, true);

    const { json, raw } = await srv.readJSON('sandbox://logs');
    assert.doesNotMatch(raw.contents[0].text, new RegExp(marker), 'the submitted code (or anything from it) is not in the logs');
    const traces = json.traces;
    assert.ok(Array.isArray(traces) && traces.length >= 2);
    assert.ok(traces.length <= 100);
    const okTrace = traces.findLast((t) => t.tool === 'run_python' && t.verdict === 'ok');
    assert.ok(okTrace, show(traces.slice(-3)));
    assert.ok(!Number.isNaN(Date.parse(okTrace.time)), 'timestamp');
    assert.ok(okTrace.level && okTrace.message, 'level and message');
    assert.equal(typeof okTrace.wall_ms, 'number');
    assert.equal(typeof okTrace.duration_ms, 'number');
    const errTrace = traces.at(-1);
    assert.equal(errTrace.tool, 'run_python');
    assert.equal(errTrace.verdict, 'error');
    assert.notEqual(errTrace.level, 'INFO');
  });

  test('sandbox://logs keeps at most 100 traces', async () => {
    const calls = [];
    for (let i = 0; i < 110; i++) calls.push(srv.call('validate_json', { data: { i }, schema: { type: 'object' } }));
    await Promise.all(calls);
    const { json } = await srv.readJSON('sandbox://logs');
    assert.equal(json.traces.length, 100);
    assert.equal(json.traces.at(-1).tool, 'validate_json');
  });

  test('sandbox://schemas lists config, user and dataset', async () => {
    const { json } = await srv.readJSON('sandbox://schemas');
    const names = json.schemas.map((s) => s.name);
    for (const n of ['config', 'user', 'dataset']) {
      assert.ok(names.includes(n), `${n} in ${names}`);
      const s = json.schemas.find((x) => x.name === n);
      assert.equal(s.uri, `sandbox://schemas/${n}`);
      assert.ok(s.description.length > 20, `${n} described`);
    }
  });

  test('sandbox://schemas/user is the JSON Schema', async () => {
    const { json, raw } = await srv.readJSON('sandbox://schemas/user');
    assert.equal(raw.contents[0].uri, 'sandbox://schemas/user');
    assert.equal(json.type, 'object');
    assert.ok(json.required.includes('email'));
    assert.ok(json.properties.username);
  });

  test('an unknown schema resource is an error', async () => {
    await assert.rejects(srv.client.readResource({ uri: 'sandbox://schemas/nope' }), /nope|not found/i);
    await assert.rejects(srv.client.readResource({ uri: 'sandbox://nothing' }), /not found|unknown|nothing/i);
  });

  test('sandbox://environment: Python and package versions', async () => {
    const { json } = await srv.readJSON('sandbox://environment');
    assert.equal(json.error, undefined, `environment probe failed: ${json.error}`);
    assert.match(json.python.python, /^3\.\d+\.\d+/);
    for (const p of ['numpy', 'pandas', 'scipy', 'sympy']) {
      assert.match(json.python.packages[p] || '', /^\d+\.\d+/, `${p} version: ${show(json.python.packages)}`);
    }
    assert.equal(json.workspace_mount, '/sandbox/workspace');
    assert.ok(json.profiles.calc.limits);
    assert.match(json.rules.calc, /os/);
    assert.match(json.rules.calc, /numpy|np/);
  });
});

describe('prompts', () => {
  test('prompts/list', async () => {
    const { prompts } = await srv.client.listPrompts();
    const byName = Object.fromEntries(prompts.map((p) => [p.name, p]));
    assert.deepEqual(Object.keys(byName).sort(), ['diagnose_validation_error', 'generate_secure_script']);
    const args = (n) => Object.fromEntries(byName[n].arguments.map((a) => [a.name, a.required === true]));
    assert.deepEqual(args('generate_secure_script'), { task: true });
    assert.deepEqual(args('diagnose_validation_error'), { schema_name: true, payload: true, errors: false });
  });

  test('generate_secure_script(task)', async () => {
    const r = await srv.client.getPrompt({ name: 'generate_secure_script', arguments: { task: 'sum the primes below 1000' } });
    assert.ok(r.messages.length >= 1);
    const t = r.messages.map((m) => m.content.text).join('\n');
    assert.match(t, /sum the primes below 1000/);
    assert.match(t, /run_python/);
    assert.match(t, /256 MiB/, 'states the active memory limit');
    assert.match(t, /\bos\b/, 'states the blocked modules');
  });

  test('generate_secure_script without task is an error', async () => {
    await assert.rejects(srv.client.getPrompt({ name: 'generate_secure_script', arguments: {} }), /task/);
    await assert.rejects(srv.client.getPrompt({ name: 'generate_secure_script' }), /task/);
  });

  test('diagnose_validation_error(schema_name, payload, errors?)', async () => {
    const payload = '{"id": 0, "username": "A"}';
    const r = await srv.client.getPrompt({ name: 'diagnose_validation_error', arguments: { schema_name: 'user', payload, errors: 'at /id [minimum]' } });
    const t = r.messages.map((m) => m.content.text).join('\n');
    assert.ok(t.includes(payload), 'payload included');
    assert.match(t, /at \/id \[minimum\]/, 'errors included');
    assert.match(t, /"username"/, 'the schema source is included');
    const r2 = await srv.client.getPrompt({ name: 'diagnose_validation_error', arguments: { schema_name: 'user', payload } });
    assert.match(r2.messages[0].content.text, /validate_json/);
  });

  test('diagnose_validation_error with a missing required argument is an error', async () => {
    await assert.rejects(srv.client.getPrompt({ name: 'diagnose_validation_error', arguments: { schema_name: 'user' } }), /payload/);
    await assert.rejects(srv.client.getPrompt({ name: 'diagnose_validation_error', arguments: { payload: '{}' } }), /schema_name/);
  });

  test('an unknown prompt is an error', async () => {
    await assert.rejects(srv.client.getPrompt({ name: 'nope', arguments: {} }));
  });
});
