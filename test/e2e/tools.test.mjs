// End-to-end tests of every tool of SPEC §5 except the snapshot tools
// (snapshots.test.mjs), through the official MCP TypeScript SDK client
// against a real `pyjail serve` with warm jail pools.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { describePids, show, startServer, text } from './harness.mjs';

const sha256 = (b) => createHash('sha256').update(b).digest('hex');

const TOOL_NAMES = [
  'close_session',
  'create_state_snapshot',
  'delete_state_snapshot',
  'diff_state_snapshot',
  'fork_session',
  'list_sessions',
  'list_state_snapshots',
  'list_workspace_files',
  'read_workspace_file',
  'restore_state_snapshot',
  'run_python',
  'run_sandbox_code',
  'validate_csv',
  'validate_json',
  'write_workspace_file',
];

let srv;
before(async () => {
  srv = await startServer();
});
after(async () => {
  if (!srv) return;
  const how = await srv.shutdown();
  assert.deepEqual(how.leftJails, [], `jail processes left after shutdown:\n${describePids(how.leftJails)}`);
});

/** Calls a tool and asserts it is not a tool error. */
async function ok(name, args) {
  const r = await srv.call(name, args);
  assert.notEqual(r.isError, true, `${name} failed: ${show(r)}\nserver stderr tail:\n${srv.stderr().slice(-2000)}`);
  return r;
}

/** Calls a tool and asserts it is a tool error whose text matches re. */
async function toolError(name, args, re) {
  const r = await srv.call(name, args);
  assert.equal(r.isError, true, `${name}(${JSON.stringify(args).slice(0, 200)}) should be a tool error: ${show(r)}`);
  if (re) assert.match(text(r), re, `${name}: error text`);
  return r;
}

describe('tools/list', () => {
  test('has exactly the SPEC §5 tools', () => {
    assert.deepEqual(srv.tools.map((t) => t.name).sort(), TOOL_NAMES);
  });

  test('input schemas are objects with the documented parameters', () => {
    const byName = Object.fromEntries(srv.tools.map((t) => [t.name, t]));
    const props = (n) => Object.keys(byName[n].inputSchema.properties || {}).sort();
    const req = (n) => (byName[n].inputSchema.required || []).slice().sort();
    for (const t of srv.tools) {
      assert.equal(t.inputSchema.type, 'object', t.name);
      assert.ok(t.description && t.description.length > 20, `${t.name} has a description`);
    }
    assert.deepEqual(props('run_python'), ['code', 'session', 'timeout']);
    assert.deepEqual(req('run_python'), ['code']);
    assert.equal(byName.run_python.inputSchema.properties.code.type, 'string');
    assert.equal(byName.run_python.inputSchema.properties.timeout.type, 'number');
    assert.deepEqual(props('run_sandbox_code'), ['code', 'session', 'timeout']);
    assert.deepEqual(req('run_sandbox_code'), ['code']);
    assert.deepEqual(props('validate_json'), ['data', 'schema', 'schema_name']);
    assert.deepEqual(req('validate_json'), ['data']);
    for (const p of ['csv', 'path', 'schema_name', 'columns', 'delimiter', 'header', 'max_errors']) {
      assert.ok(props('validate_csv').includes(p), `validate_csv has ${p}`);
    }
    assert.deepEqual(props('create_state_snapshot'), ['description']);
    assert.deepEqual(req('create_state_snapshot'), []);
    assert.deepEqual(props('list_state_snapshots'), []);
    for (const n of ['restore_state_snapshot', 'delete_state_snapshot', 'diff_state_snapshot']) {
      assert.deepEqual(props(n), ['snapshot_id'], n);
      assert.deepEqual(req(n), ['snapshot_id'], n);
    }
    assert.deepEqual(props('write_workspace_file'), ['content', 'encoding', 'path']);
    assert.deepEqual(req('write_workspace_file'), ['content', 'path']);
    assert.deepEqual(byName.write_workspace_file.inputSchema.properties.encoding.enum.slice().sort(), ['base64', 'utf-8']);
    assert.deepEqual(props('read_workspace_file'), ['length', 'offset', 'path']);
    assert.deepEqual(req('read_workspace_file'), ['path']);
    assert.deepEqual(props('list_workspace_files'), ['path']);
  });

  test('run tools declare an output schema for the §4 record', () => {
    for (const n of ['run_python', 'run_sandbox_code']) {
      const t = srv.tools.find((x) => x.name === n);
      assert.ok(t.outputSchema, `${n} has an outputSchema`);
      assert.equal(t.outputSchema.type, 'object');
      for (const f of ['verdict', 'exit_code', 'stdout', 'stderr', 'truncated', 'wall_ms', 'cpu_ms', 'peak_memory_bytes']) {
        assert.ok(f in t.outputSchema.properties, `${n} outputSchema has ${f}`);
      }
      assert.deepEqual(
        t.outputSchema.properties.verdict.enum.slice().sort(),
        ['cpu_limit', 'error', 'internal_error', 'memory_limit', 'network_limit', 'ok', 'output_limit', 'quota_exceeded', 'rejected', 'timeout'],
      );
    }
  });

  test('annotations are honest', () => {
    const byName = Object.fromEntries(srv.tools.map((t) => [t.name, t.annotations || {}]));
    for (const n of ['validate_json', 'validate_csv', 'read_workspace_file', 'list_workspace_files', 'list_state_snapshots', 'diff_state_snapshot']) {
      assert.equal(byName[n].readOnlyHint, true, `${n} readOnlyHint`);
    }
    for (const n of ['run_python', 'run_sandbox_code']) {
      assert.equal(byName[n].openWorldHint, false, `${n} openWorldHint`);
      assert.equal(byName[n].readOnlyHint, false, `${n} executes code: not read-only`);
    }
    for (const n of ['write_workspace_file', 'restore_state_snapshot', 'delete_state_snapshot', 'run_sandbox_code']) {
      assert.notEqual(byName[n].readOnlyHint, true, `${n} changes state`);
      assert.equal(byName[n].destructiveHint, true, `${n} destructiveHint`);
    }
    for (const n of TOOL_NAMES) assert.equal(byName[n].openWorldHint, false, `${n} openWorldHint`);
  });
});

describe('run_python', () => {
  test('print(1+1)', async () => {
    const r = await ok('run_python', { code: 'print(1+1)' });
    assert.equal(text(r).trim(), '2');
    const s = r.structuredContent;
    assert.equal(s.verdict, 'ok');
    assert.equal(s.stdout, '2\n');
    assert.equal(s.exit_code, 0);
    assert.equal(s.profile, 'calc');
    assert.equal(typeof s.wall_ms, 'number');
    assert.equal(typeof s.cpu_ms, 'number');
    assert.ok(s.peak_memory_bytes > 0, 'peak memory reported');
    assert.deepEqual(s.truncated, { stdout: false, stderr: false, value: false });
  });

  test('scipy quad example of the calculator server', async () => {
    const code = [
      'from scipy.integrate import quad',
      'import numpy as np',
      'result, error = quad(lambda x: np.exp(np.sin(2*x)), 0, np.pi/2)',
      'print(f"result={result}")',
      'print(f"error={error:.1e}")',
    ].join('\n');
    // A generous timeout: this test is about the result, and a cold jail
    // importing scipy on a loaded machine can take seconds.
    const r = await ok('run_python', { code, timeout: 30 });
    assert.match(text(r), /^result=3\.104379017855555$/m);
    assert.match(text(r), /^error=\d\.\de-\d+$/m);
    assert.equal(r.structuredContent.verdict, 'ok');
  });

  test('value of the last expression', async () => {
    const r = await ok('run_python', { code: 'x = 21\nx * 2' });
    assert.equal(r.structuredContent.value, '42');
    assert.match(text(r), /42/);
    assert.equal(r.structuredContent.stdout, '');
  });

  test('numpy, pandas, sympy and math are in scope without import', async () => {
    const r = await ok('run_python', {
      code: 'print(int(np.arange(5).sum()), int(pd.Series([1, 2, 3]).sum()), sympy.factorint(12), math.factorial(5))',
      timeout: 30,
    });
    assert.equal(text(r).trim(), '10 6 {2: 2, 3: 1} 120');
  });

  test('an exception is a tool error with the traceback', async () => {
    const r = await toolError('run_python', { code: 'def f():\n    return 1/0\nf()' });
    const s = r.structuredContent;
    assert.equal(s.verdict, 'error');
    assert.match(text(r), /Traceback/);
    assert.match(text(r), /ZeroDivisionError/);
    assert.match(s.stderr, /ZeroDivisionError: division by zero/);
  });

  test('import os is refused and the module named', async () => {
    const r = await toolError('run_python', { code: 'import os\nprint(os.listdir("/"))' });
    const s = r.structuredContent;
    assert.ok(['rejected', 'error'].includes(s.verdict), `verdict ${s.verdict}`);
    assert.match(text(r), /\bos\b/);
    assert.doesNotMatch(s.stdout, /etc|usr|bin/, 'the code did not list /');
  });

  test('other blocked modules: subprocess, socket, ctypes', async () => {
    for (const m of ['subprocess', 'socket', 'ctypes']) {
      const r = await toolError('run_python', { code: `import ${m}` });
      assert.ok(['rejected', 'error'].includes(r.structuredContent.verdict), `${m}: ${r.structuredContent.verdict}`);
      assert.match(text(r), new RegExp(`\\b${m}\\b`), `${m} named`);
    }
  });

  test('dunder escape attempts are rejected', async () => {
    const r = await toolError('run_python', { code: "().__class__.__bases__[0].__subclasses__()" });
    assert.ok(['rejected', 'error'].includes(r.structuredContent.verdict));
  });

  test('while True: pass with timeout=1 is a timeout', async () => {
    const t0 = Date.now();
    const r = await toolError('run_python', { code: 'while True: pass', timeout: 1 });
    const elapsed = Date.now() - t0;
    assert.equal(r.structuredContent.verdict, 'timeout');
    assert.match(text(r), /timeout|time limit/i);
    assert.ok(elapsed < 6000, `a 1 s timeout took ${elapsed} ms`);
  });

  test('a timeout above the maximum is lowered, and said so', async () => {
    const r = await ok('run_python', { code: 'print("fast")', timeout: 3600 });
    assert.match(text(r), /fast/);
    assert.match(text(r), /lowered|maximum/i);
  });

  test('growing memory until the limit is memory_limit', async () => {
    // timeout 30: on a loaded machine filling 256 MiB can take seconds, and
    // the point here is which limit is named.
    const r = await toolError('run_python', { code: 'a = []\nwhile True:\n    a.append(bytearray(10 * 1024 * 1024))', timeout: 30 });
    assert.equal(r.structuredContent.verdict, 'memory_limit', show(r));
    assert.match(text(r), /memory limit/i);
    assert.match(text(r), /MiB/);
  });

  test('one allocation above the limit (MemoryError) is memory_limit', async () => {
    const r = await toolError('run_python', { code: 'x = bytearray(2 * 1024 ** 3)', timeout: 30 });
    assert.equal(r.structuredContent.verdict, 'memory_limit', show(r));
  });

  test('huge output is output_limit, truncated', async () => {
    const r = await toolError('run_python', { code: 'for _ in range(4096):\n    print("x" * 1023)' });
    const s = r.structuredContent;
    assert.equal(s.verdict, 'output_limit', show(r));
    assert.equal(s.truncated.stdout, true);
    // 1 MiB of the program's output is kept (head and tail) plus a short
    // marker saying how much was omitted in between.
    assert.ok(s.stdout.length <= 1024 * 1024 + 256, `stdout is ${s.stdout.length} bytes`);
    assert.ok(s.stdout.length >= 1024 * 1024, 'the output up to the limit is kept');
    assert.match(s.stdout, /omitted \d+ bytes/);
    assert.match(text(r), /truncated|output limit/i);
  });

  test('stderr of a successful run is reported', async () => {
    const r = await ok('run_python', { code: 'import warnings\nwarnings.warn("careful")\nprint("done")' });
    assert.match(r.structuredContent.stderr, /careful/);
    assert.match(text(r), /done/);
  });
});

describe('run_sandbox_code', () => {
  test('a file written in the workspace is reported with its sha256', async () => {
    const r = await ok('run_sandbox_code', {
      code: 'with open("out.txt", "w") as f:\n    f.write("hello sandbox")\nprint("wrote")',
    });
    const s = r.structuredContent;
    assert.equal(s.verdict, 'ok');
    assert.equal(s.profile, 'workspace');
    const created = (s.files?.created || []).find((f) => f.path === 'out.txt');
    assert.ok(created, `files.created lists out.txt: ${show(r)}`);
    assert.equal(created.size, 13);
    assert.equal(created.sha256, sha256('hello sandbox'));
    assert.equal(fs.readFileSync(path.join(srv.env.workspace, 'out.txt'), 'utf8'), 'hello sandbox');
    // …and the file tools see it.
    const rd = await ok('read_workspace_file', { path: 'out.txt' });
    assert.equal(rd.structuredContent.content, 'hello sandbox');
  });

  test('a modified file is reported with its new sha256', async () => {
    await ok('write_workspace_file', { path: 'mod.txt', content: 'v1' });
    // (os, pathlib and shutil are blocked in this profile, so code has no
    // way to delete a file; deletions are covered by the snapshot tests.)
    const r = await ok('run_sandbox_code', { code: 'with open("mod.txt", "a") as f:\n    f.write("+v2")' });
    const mod = (r.structuredContent.files?.modified || []).find((f) => f.path === 'mod.txt');
    assert.ok(mod, `files.modified lists mod.txt: ${show(r)}`);
    assert.equal(mod.sha256, sha256('v1+v2'));
  });

  test('a run overlapping another reports only the files it changed', async () => {
    for (let i = 0; i < 20; i++) await ok('write_workspace_file', { path: `overlap/f${i}.txt`, content: `file ${i}` });
    const slow = srv.call('run_sandbox_code', {
      code: 'import time\ntime.sleep(3)\nwith open("overlap/slow.txt", "w") as f:\n    f.write("slow")',
      timeout: 10,
    });
    await new Promise((r) => setTimeout(r, 500));
    const fast = await ok('run_sandbox_code', { code: 'print("fast")' });
    const r = await slow;
    assert.notEqual(r.isError, true, show(r));
    const f = r.structuredContent.files;
    assert.deepEqual(f.created.map((x) => x.path), ['overlap/slow.txt']);
    assert.deepEqual(f.modified.map((x) => x.path), [], 'files nobody wrote are not "modified"');
    assert.deepEqual(f.deleted, []);
    const ff = fast.structuredContent.files;
    assert.deepEqual([...(ff.created || []), ...(ff.modified || []), ...(ff.deleted || [])], [], show(fast));
  });

  test('cwd is the workspace and workspace files are readable', async () => {
    await ok('write_workspace_file', { path: 'in/data.txt', content: 'from the host' });
    const r = await ok('run_sandbox_code', { code: 'print(open("in/data.txt").read())' });
    assert.equal(text(r).trim(), 'from the host');
  });

  test("open('/etc/passwd') is a PermissionError", async () => {
    const r = await toolError('run_sandbox_code', { code: "print(open('/etc/passwd').read())" });
    assert.equal(r.structuredContent.verdict, 'error');
    assert.match(text(r), /PermissionError/);
    assert.doesNotMatch(text(r), /root:x:0:0/);
  });

  test("open('../x', 'w') is a PermissionError and writes nothing", async () => {
    const r = await toolError('run_sandbox_code', { code: "open('../escaped.txt', 'w').write('x')" });
    assert.match(text(r), /PermissionError/);
    assert.equal(fs.existsSync(path.join(srv.env.root, 'escaped.txt')), false);
  });

  test('exec and eval are rejected', async () => {
    const r = await toolError('run_sandbox_code', { code: "exec('print(1)')" });
    assert.ok(['rejected', 'error'].includes(r.structuredContent.verdict));
    assert.match(text(r), /exec/);
  });
});

const userExample = {
  id: 42,
  username: 'ada.lovelace',
  email: 'ada@example.org',
  full_name: 'Ada Lovelace',
  age: 36,
  roles: ['admin', 'editor'],
  created_at: '2024-05-01T09:30:00Z',
  active: true,
};

describe('validate_json', () => {
  const inline = { type: 'object', required: ['a'], properties: { a: { type: 'integer', minimum: 0 } } };

  test('inline schema, valid data', async () => {
    const r = await ok('validate_json', { data: { a: 1 }, schema: inline });
    assert.equal(r.structuredContent.valid, true);
    assert.deepEqual(r.structuredContent.errors, []);
  });

  test('inline schema, invalid data: valid=false with locations (not a tool error)', async () => {
    const r = await ok('validate_json', { data: { a: -1 }, schema: inline });
    const s = r.structuredContent;
    assert.equal(s.valid, false);
    assert.ok(s.errors.length >= 1);
    const e = s.errors.find((x) => x.instance_location === '/a');
    assert.ok(e, show(r));
    assert.match(e.keyword_location, /minimum/);
    assert.ok(e.message.length > 0);
    assert.match(text(r), /invalid/);
  });

  test('missing required property', async () => {
    const r = await ok('validate_json', { data: {}, schema: inline });
    const e = r.structuredContent.errors.find((x) => /required/.test(x.keyword_location));
    assert.ok(e, show(r));
    assert.equal(e.instance_location, '');
    assert.match(e.message, /\ba\b/);
  });

  test('draft-04 and draft-07 inline schemas', async () => {
    const d4 = { $schema: 'http://json-schema.org/draft-04/schema#', type: 'object', properties: { n: { type: 'number', maximum: 5, exclusiveMaximum: true } } };
    let r = await ok('validate_json', { data: { n: 5 }, schema: d4 });
    assert.equal(r.structuredContent.valid, false, show(r));
    const d7 = { $schema: 'http://json-schema.org/draft-07/schema#', if: { properties: { t: { const: 'x' } } }, then: { required: ['y'] } };
    r = await ok('validate_json', { data: { t: 'x' }, schema: d7 });
    assert.equal(r.structuredContent.valid, false, show(r));
  });

  test('named schemas: user, config, dataset accept their examples', async () => {
    for (const name of ['user', 'config', 'dataset']) {
      const res = await srv.readJSON(`sandbox://schemas/${name}`);
      const example = res.json.examples?.[0];
      assert.ok(example, `${name} schema has an example`);
      const r = await ok('validate_json', { data: example, schema_name: name });
      assert.equal(r.structuredContent.valid, true, `${name}: ${show(r)}`);
    }
    const r = await ok('validate_json', { data: userExample, schema_name: 'user' });
    assert.equal(r.structuredContent.valid, true);
  });

  test('user schema reports each bad field', async () => {
    const r = await ok('validate_json', {
      data: { id: 0, username: 'A', email: 'not-an-email', created_at: 'yesterday', age: 200 },
      schema_name: 'user',
    });
    const s = r.structuredContent;
    assert.equal(s.valid, false);
    const locs = s.errors.map((e) => e.instance_location);
    for (const l of ['/username', '/email', '/created_at', '/age']) assert.ok(locs.some((x) => x.startsWith(l)), `error at ${l}: ${JSON.stringify(locs)}`);
  });

  test('config schema: a misspelt key is reported', async () => {
    const r = await ok('validate_json', {
      data: { name: 'svc', version: '1.0.0', environment: 'production', server: { port: 8080 }, logLevel: 'info' },
      schema_name: 'config',
    });
    assert.equal(r.structuredContent.valid, false);
    assert.ok(r.structuredContent.errors.some((e) => /additionalProperties/.test(e.keyword_location)), show(r));
  });

  test('data as a JSON string', async () => {
    const r = await ok('validate_json', { data: JSON.stringify(userExample), schema_name: 'user' });
    assert.equal(r.structuredContent.valid, true);
    assert.equal(r.structuredContent.source, 'string');
  });

  test('a string that is not JSON is a tool error', async () => {
    await toolError('validate_json', { data: '{not json', schema_name: 'user' }, /JSON/);
  });

  test('data from a workspace file {"path": ...}', async () => {
    await ok('write_workspace_file', { path: 'users/ada.json', content: JSON.stringify(userExample) });
    let r = await ok('validate_json', { data: { path: 'users/ada.json' }, schema_name: 'user' });
    assert.equal(r.structuredContent.valid, true, show(r));
    assert.match(r.structuredContent.source, /users\/ada\.json/);
    await ok('write_workspace_file', { path: 'users/bad.json', content: JSON.stringify({ ...userExample, email: 5 }) });
    r = await ok('validate_json', { data: { path: 'users/bad.json' }, schema_name: 'user' });
    assert.equal(r.structuredContent.valid, false);
    assert.ok(r.structuredContent.errors.some((e) => e.instance_location === '/email'));
  });

  test('a workspace path outside the workspace or missing is a tool error', async () => {
    await toolError('validate_json', { data: { path: '../../etc/passwd' }, schema_name: 'user' }, /outside|invalid|not a valid/i);
    await toolError('validate_json', { data: { path: '/etc/passwd' }, schema_name: 'user' });
    await toolError('validate_json', { data: { path: 'nope.json' }, schema_name: 'user' }, /no such/i);
  });

  test('unknown schema name is a tool error listing the registered ones', async () => {
    const r = await toolError('validate_json', { data: {}, schema_name: 'nope' }, /nope/);
    for (const n of ['config', 'user', 'dataset']) assert.match(text(r), new RegExp(n));
  });

  test('both or neither of schema and schema_name is a tool error', async () => {
    await toolError('validate_json', { data: {}, schema_name: 'user', schema: { type: 'object' } }, /exactly one/);
    await toolError('validate_json', { data: {} }, /schema/);
  });

  test('remote and file $refs are refused, never fetched', async () => {
    for (const ref of ['https://example.com/schema.json', 'http://127.0.0.1:1/x.json', 'file:///etc/passwd']) {
      const r = await toolError('validate_json', { data: {}, schema: { $ref: ref } });
      assert.match(text(r), /ref|load|fetch|not allowed|refus/i, `${ref}: ${text(r)}`);
    }
  });

  test('an invalid inline schema is a tool error', async () => {
    await toolError('validate_json', { data: {}, schema: { type: 'no-such-type' } }, /schema/);
  });
});

describe('validate_csv', () => {
  const columns = [
    { name: 'name', type: 'string', required: true },
    { name: 'age', type: 'integer', min: 0, max: 150 },
    { name: 'joined', type: 'date', nullable: true },
  ];

  test('valid CSV text with columns', async () => {
    const r = await ok('validate_csv', { csv: 'name,age,joined\nann,30,2024-01-02\nbob,41,\n', columns });
    const s = r.structuredContent;
    assert.equal(s.valid, true, show(r));
    assert.equal(s.rows, 2);
    assert.equal(s.columns, 3);
    assert.deepEqual(s.header, ['name', 'age', 'joined']);
  });

  test('bad rows: errors with row, column and code', async () => {
    const r = await ok('validate_csv', { csv: 'name,age,joined\nann,30,2024-01-02\nbob,x,\ncy,-4,2024-13-45\n', columns });
    const s = r.structuredContent;
    assert.equal(s.valid, false);
    const find = (row, column) => s.errors.find((e) => e.row === row && e.column === column);
    assert.equal(find(2, 'age')?.code, 'type', show(r));
    assert.equal(find(3, 'age')?.code, 'min', show(r));
    assert.equal(find(3, 'joined')?.code, 'type', show(r));
    for (const e of s.errors) assert.ok(e.message.length > 0);
    assert.equal(s.error_count, s.errors.length);
  });

  test('structure only: uneven rows', async () => {
    const r = await ok('validate_csv', { csv: 'a,b\n1,2\n3\n' });
    assert.equal(r.structuredContent.valid, false);
    assert.equal(r.structuredContent.errors[0].code, 'field_count');
    assert.equal(r.structuredContent.errors[0].row, 2);
  });

  test('delimiter and header options', async () => {
    const r = await ok('validate_csv', { csv: '1;2\n3;4\n', delimiter: ';', header: false, columns: [{ name: 'x', type: 'integer' }, { name: 'y', type: 'integer' }] });
    assert.equal(r.structuredContent.valid, true, show(r));
    assert.equal(r.structuredContent.rows, 2);
    assert.equal(r.structuredContent.columns, 2);
  });

  test('a workspace file with schema_name dataset', async () => {
    const good = 'id,name,category,value,recorded_at,active\n1,widget,tools,9.5,2024-05-01T17:00:00Z,true\n2,gadget,,,2024-05-01T17:00:00Z,false\n';
    await ok('write_workspace_file', { path: 'data/good.csv', content: good });
    let r = await ok('validate_csv', { path: 'data/good.csv', schema_name: 'dataset' });
    assert.equal(r.structuredContent.valid, true, show(r));
    assert.equal(r.structuredContent.rows, 2);

    const bad = 'id,name,category,value,recorded_at,active\n1,widget,tools,9.5,2024-05-01T17:00:00Z,true\n1,gadget,,-3,last tuesday,maybe\n';
    await ok('write_workspace_file', { path: 'data/bad.csv', content: bad });
    r = await ok('validate_csv', { path: 'data/bad.csv', schema_name: 'dataset' });
    const s = r.structuredContent;
    assert.equal(s.valid, false);
    const codes = Object.fromEntries(s.errors.map((e) => [`${e.row}:${e.column}`, e.code]));
    assert.equal(codes['2:id'], 'unique', show(r));
    assert.equal(codes['2:value'], 'min', show(r));
    assert.equal(codes['2:recorded_at'], 'type', show(r));
    assert.equal(codes['2:active'], 'type', show(r));
  });

  test('missing required column', async () => {
    const r = await ok('validate_csv', { csv: 'id,name\n1,x\n', schema_name: 'dataset' });
    assert.equal(r.structuredContent.valid, false);
    assert.ok(r.structuredContent.errors.some((e) => e.code === 'missing_column' && e.column === 'recorded_at'), show(r));
  });

  test('max_errors cuts the list but counts all', async () => {
    const rows = Array.from({ length: 50 }, (_, i) => `n${i},bad`).join('\n');
    const r = await ok('validate_csv', { csv: `name,age\n${rows}\n`, columns: columns.slice(0, 2), max_errors: 5 });
    assert.equal(r.structuredContent.errors.length, 5);
    assert.equal(r.structuredContent.error_count, 50);
    assert.equal(r.structuredContent.errors_truncated, true);
  });

  test('argument problems are tool errors', async () => {
    await toolError('validate_csv', { csv: 'a\n1\n', path: 'x.csv' }, /exactly one/);
    await toolError('validate_csv', {}, /exactly one/);
    await toolError('validate_csv', { csv: 'a\n1\n', schema_name: 'nope' }, /nope/);
    await toolError('validate_csv', { path: '../outside.csv' }, /outside|not a valid/i);
    await toolError('validate_csv', { path: 'no/such.csv' }, /no such/i);
    await toolError('validate_csv', { csv: 'a\n1\n', columns: [{ name: 'a', type: 'complex' }] });
    await toolError('validate_csv', { csv: 'a\n1\n', delimiter: '"' }, /delimiter/);
  });
});

describe('workspace files', () => {
  test('write and read UTF-8', async () => {
    const content = 'Grüße, 世界! 🐍\nline 2\n';
    const w = await ok('write_workspace_file', { path: 'notes/hello.txt', content });
    assert.equal(w.structuredContent.sha256, sha256(Buffer.from(content)));
    assert.equal(w.structuredContent.size, Buffer.byteLength(content));
    const r = await ok('read_workspace_file', { path: 'notes/hello.txt' });
    assert.equal(r.structuredContent.content, content);
    assert.equal(r.structuredContent.encoding, 'utf-8');
    assert.equal(r.structuredContent.eof, true);
    assert.equal(text(r), content);
    assert.equal(fs.readFileSync(path.join(srv.env.workspace, 'notes/hello.txt'), 'utf8'), content);
  });

  test('write and read base64 (binary)', async () => {
    const bytes = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    await ok('write_workspace_file', { path: 'bin/all.bin', content: bytes.toString('base64'), encoding: 'base64' });
    assert.deepEqual(fs.readFileSync(path.join(srv.env.workspace, 'bin/all.bin')), bytes);
    const r = await ok('read_workspace_file', { path: 'bin/all.bin' });
    assert.equal(r.structuredContent.encoding, 'base64');
    assert.deepEqual(Buffer.from(r.structuredContent.content, 'base64'), bytes);
  });

  test('offset and length', async () => {
    await ok('write_workspace_file', { path: 'digits.txt', content: '0123456789' });
    let r = await ok('read_workspace_file', { path: 'digits.txt', offset: 3, length: 4 });
    assert.equal(r.structuredContent.content, '3456');
    assert.equal(r.structuredContent.size, 10);
    assert.equal(r.structuredContent.eof, false);
    assert.match(text(r), /offset=7/);
    r = await ok('read_workspace_file', { path: 'digits.txt', offset: 7 });
    assert.equal(r.structuredContent.content, '789');
    assert.equal(r.structuredContent.eof, true);
    r = await ok('read_workspace_file', { path: 'digits.txt', offset: 100 });
    assert.equal(r.structuredContent.content, '');
    assert.equal(r.structuredContent.eof, true);
  });

  test('list with sizes, types and mtimes', async () => {
    await ok('write_workspace_file', { path: 'list/a.txt', content: 'aaa' });
    await ok('write_workspace_file', { path: 'list/sub/b.txt', content: 'bb' });
    const r = await ok('list_workspace_files', { path: 'list' });
    const entries = r.structuredContent.entries;
    const a = entries.find((e) => e.path.endsWith('a.txt'));
    assert.ok(a, show(r));
    assert.equal(a.type, 'file');
    assert.equal(a.size, 3);
    const mtime = fs.statSync(path.join(srv.env.workspace, 'list/a.txt')).mtimeMs;
    assert.ok(Math.abs(Date.parse(a.mod_time) - mtime) < 1000, `mod_time ${a.mod_time} vs ${new Date(mtime).toISOString()}`);
    assert.ok(entries.some((e) => e.path.endsWith('sub') && e.type === 'dir') || entries.some((e) => e.path.endsWith('sub/b.txt')), show(r));
    const all = await ok('list_workspace_files', {});
    assert.ok(all.structuredContent.entries.some((e) => e.path.includes('hello.txt') || e.path === 'notes'), show(all));
  });

  test('paths escaping the workspace are tool errors and write nothing', async () => {
    await toolError('write_workspace_file', { path: '../x', content: 'x' }, /outside|not a valid/i);
    assert.equal(fs.existsSync(path.join(srv.env.root, 'x')), false);
    await toolError('write_workspace_file', { path: 'a/../../y', content: 'y' }, /outside|not a valid/i);
    assert.equal(fs.existsSync(path.join(srv.env.root, 'y')), false);
    const before = fs.readFileSync('/etc/passwd', 'utf8');
    await toolError('write_workspace_file', { path: '/etc/passwd', content: 'pwned' });
    assert.equal(fs.readFileSync('/etc/passwd', 'utf8'), before);
    const r = await toolError('read_workspace_file', { path: '/etc/passwd' });
    assert.doesNotMatch(text(r), /root:x:0:0/);
    await toolError('read_workspace_file', { path: '../config.json' }, /outside|not a valid/i);
    await toolError('list_workspace_files', { path: '..' }, /outside|not a valid/i);
    await toolError('list_workspace_files', { path: '/etc' });
  });

  test('a symlink leading out of the workspace is not followed', async () => {
    fs.symlinkSync('/etc/passwd', path.join(srv.env.workspace, 'passwd-link'));
    fs.symlinkSync('/etc', path.join(srv.env.workspace, 'etc-link'));
    try {
      let r = await toolError('read_workspace_file', { path: 'passwd-link' });
      assert.doesNotMatch(text(r), /root:x:0:0/);
      r = await toolError('read_workspace_file', { path: 'etc-link/passwd' });
      assert.doesNotMatch(text(r), /root:x:0:0/);
      const before = fs.readFileSync('/etc/passwd', 'utf8');
      await toolError('write_workspace_file', { path: 'passwd-link', content: 'pwned' }).catch(() => {});
      assert.equal(fs.readFileSync('/etc/passwd', 'utf8'), before, '/etc/passwd untouched');
      await toolError('write_workspace_file', { path: 'etc-link/pyjail-e2e-should-not-exist', content: 'x' });
      assert.equal(fs.existsSync('/etc/pyjail-e2e-should-not-exist'), false);
    } finally {
      fs.rmSync(path.join(srv.env.workspace, 'passwd-link'), { force: true });
      fs.rmSync(path.join(srv.env.workspace, 'etc-link'), { force: true });
    }
  });

  test('invalid base64 is a tool error', async () => {
    await toolError('write_workspace_file', { path: 'b.bin', content: 'not base64!!', encoding: 'base64' }, /base64/);
    assert.equal(fs.existsSync(path.join(srv.env.workspace, 'b.bin')), false);
  });

  test('unknown encoding and missing file are tool errors', async () => {
    await toolError('write_workspace_file', { path: 'c.txt', content: 'x', encoding: 'latin-1' }, /encoding/);
    await toolError('read_workspace_file', { path: 'does/not/exist.txt' }, /no such/i);
  });
});

describe('bad input', () => {
  test('wrong types are tool errors naming the argument', async () => {
    await toolError('run_python', { code: 5 }, /code/);
    await toolError('run_python', { code: 'print(1)', timeout: 'soon' }, /timeout/);
    await toolError('run_python', { code: 'print(1)', timeout: -1 }, /timeout/);
    await toolError('read_workspace_file', { path: 'x', offset: 'a' }, /offset/);
    await toolError('validate_csv', { csv: 'a\n', header: 'yes' }, /header/);
    await toolError('restore_state_snapshot', { snapshot_id: 7 }, /snapshot_id/);
  });

  test('missing arguments are tool errors naming them', async () => {
    await toolError('run_python', {}, /code/);
    await toolError('run_sandbox_code', {}, /code/);
    await toolError('write_workspace_file', { path: 'x.txt' }, /content/);
    await toolError('read_workspace_file', {}, /path/);
    await toolError('validate_json', { schema_name: 'user' }, /data/);
    await toolError('restore_state_snapshot', {}, /snapshot_id/);
  });

  test('unknown arguments are tool errors', async () => {
    await toolError('run_python', { code: 'print(1)', cmd: 'ls' }, /cmd/);
  });

  test('empty code is a tool error', async () => {
    await toolError('run_python', { code: '   \n' }, /empty/);
  });

  test('10 MB of code is a tool error naming the limit, and the server keeps serving', async () => {
    const code = '#' + 'x'.repeat(10 * 1024 * 1024) + '\nprint(1)';
    const r = await toolError('run_python', { code }, /limit/);
    assert.match(text(r), /code/);
    assert.ok(text(r).length < 2000, 'the error does not echo the code');
    const again = await ok('run_python', { code: 'print(1+1)' });
    assert.equal(text(again).trim(), '2');
  });

  test('an unknown tool is a protocol error', async () => {
    await assert.rejects(srv.call('rm_rf', {}), (err) => {
      assert.match(String(err.message), /rm_rf|not found|unknown/i);
      return true;
    });
  });
});

describe('ten concurrent calls', () => {
  test('ten concurrent run_python calls all answer correctly', async () => {
    const t0 = Date.now();
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => srv.call('run_python', { code: `import time\ntime.sleep(0.2)\nprint(${i} * ${i})` })),
    );
    const ms = Date.now() - t0;
    results.forEach((r, i) => {
      assert.notEqual(r.isError, true, show(r));
      assert.equal(text(r).trim(), String(i * i));
    });
    // Informational: how long ten 200 ms runs took with the configured concurrency.
    console.log(`# ten concurrent 200 ms runs took ${ms} ms`);
  });

  test('mixed tools concurrently', async () => {
    const calls = [];
    for (let i = 0; i < 5; i++) {
      calls.push(srv.call('run_python', { code: `${i} + 100` }).then((r) => assert.equal(r.structuredContent.value, String(i + 100))));
      calls.push(srv.call('validate_json', { data: userExample, schema_name: 'user' }).then((r) => assert.equal(r.structuredContent.valid, true)));
      calls.push(srv.call('run_sandbox_code', { code: `print(${i})` }).then((r) => assert.equal(text(r).trim(), String(i))));
    }
    await Promise.all(calls);
  });
});
