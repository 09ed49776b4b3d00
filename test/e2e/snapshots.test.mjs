// End-to-end tests of the snapshot tools (SPEC §6) through the official MCP
// client: create → change → diff → restore round trip with contents and
// mtimes, listing order, deletion, unknown and malformed ids, and a
// tampered snapshot.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { describePids, show, sleep, startServer, text } from './harness.mjs';

let srv;
let ws;
before(async () => {
  // Snapshots need no jail; --no-warm keeps this server light.
  srv = await startServer({ noWarm: true });
  ws = srv.env.workspace;
});
after(async () => {
  if (!srv) return;
  const how = await srv.shutdown();
  assert.deepEqual(how.leftJails, [], `jail processes left:\n${describePids(how.leftJails)}`);
});

async function ok(name, args) {
  const r = await srv.call(name, args);
  assert.notEqual(r.isError, true, `${name} failed: ${show(r)}\nstderr tail:\n${srv.stderr().slice(-2000)}`);
  return r;
}
async function toolError(name, args, re) {
  const r = await srv.call(name, args);
  assert.equal(r.isError, true, `${name}(${JSON.stringify(args)}) should be a tool error: ${show(r)}`);
  if (re) assert.match(text(r), re);
  return r;
}

/** path → {content (Buffer), mtimeNs (bigint), mode} of every file under ws. */
function scan() {
  const out = {};
  const walk = (dir, rel) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (e.isDirectory()) walk(p, r);
      else {
        const st = fs.lstatSync(p, { bigint: true });
        out[r] = { content: fs.readFileSync(p), mtimeNs: st.mtimeNs, mode: Number(st.mode & 0o777n) };
      }
    }
  };
  walk(ws, '');
  return out;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('snapshot round trip', () => {
  let first;
  let before;
  let listedBefore;

  test('create: a UUID, an ISO-8601 UTC time, the file count', async () => {
    await ok('write_workspace_file', { path: 'a.txt', content: 'alpha\n' });
    await ok('write_workspace_file', { path: 'b.txt', content: 'bravo\n' });
    await ok('write_workspace_file', { path: 'dir/c.bin', content: Buffer.from([0, 1, 2, 255, 254]).toString('base64'), encoding: 'base64' });
    await ok('write_workspace_file', { path: 'dir/deep/d.txt', content: 'delta' });
    // Distinct, old mtimes with sub-second parts, so restoring them is visible.
    fs.utimesSync(path.join(ws, 'a.txt'), new Date('2020-01-02T03:04:05.678Z'), new Date('2020-01-02T03:04:05.678Z'));
    fs.utimesSync(path.join(ws, 'b.txt'), new Date('2021-06-07T08:09:10.123Z'), new Date('2021-06-07T08:09:10.123Z'));
    fs.utimesSync(path.join(ws, 'dir/c.bin'), new Date('2019-12-31T23:59:59Z'), new Date('2019-12-31T23:59:59Z'));
    before = scan();
    listedBefore = (await ok('list_workspace_files', {})).structuredContent.entries.filter((e) => e.type === 'file');

    const t0 = Date.now();
    const r = await ok('create_state_snapshot', { description: 'before the changes' });
    const s = r.structuredContent;
    assert.match(s.id, UUID);
    assert.match(s.created_at, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
    assert.ok(Math.abs(Date.parse(s.created_at) - t0) < 60_000, 'created_at is now');
    assert.equal(s.description, 'before the changes');
    assert.equal(s.files, 4);
    assert.equal(s.bytes, 6 + 6 + 5 + 5);
    assert.match(text(r), new RegExp(s.id));
    first = s.id;
  });

  test('change the workspace: modify, add, delete, touch', async () => {
    await sleep(20);
    await ok('write_workspace_file', { path: 'a.txt', content: 'ALPHA CHANGED\n' });
    await ok('write_workspace_file', { path: 'new.txt', content: 'brand new' });
    await ok('write_workspace_file', { path: 'dir/new2.txt', content: 'also new' });
    fs.unlinkSync(path.join(ws, 'b.txt'));
    fs.rmSync(path.join(ws, 'dir/deep'), { recursive: true });
    // Same content, new mtime.
    fs.utimesSync(path.join(ws, 'dir/c.bin'), new Date(), new Date());
    // A change made by code in the jail, too.
    const r = await ok('run_sandbox_code', { code: 'with open("dir/c.bin", "ab") as f:\n    f.write(b"!")' });
    assert.ok((r.structuredContent.files?.modified || []).some((f) => f.path === 'dir/c.bin'), show(r));
  });

  test('diff shows what changed', async () => {
    const r = await ok('diff_state_snapshot', { snapshot_id: first });
    const s = r.structuredContent;
    assert.deepEqual(s.added.slice().sort(), ['dir/new2.txt', 'new.txt']);
    assert.deepEqual(s.removed.slice().sort(), ['b.txt', 'dir/deep/d.txt']);
    assert.deepEqual(s.modified.slice().sort(), ['a.txt', 'dir/c.bin']);
    assert.equal(s.unchanged, 0);
    assert.match(text(r), /a\.txt/);
  });

  test('restore brings back contents and mtimes exactly', async () => {
    const r = await ok('restore_state_snapshot', { snapshot_id: first });
    const s = r.structuredContent;
    assert.equal(s.snapshot.id, first);
    assert.ok(s.deleted.includes('new.txt') && s.deleted.includes('dir/new2.txt'), show(r));
    for (const p of ['a.txt', 'b.txt', 'dir/c.bin', 'dir/deep/d.txt']) assert.ok(s.written.includes(p), `${p} written: ${show(r)}`);

    const after = scan();
    assert.deepEqual(Object.keys(after).sort(), Object.keys(before).sort(), 'same set of files');
    for (const [p, want] of Object.entries(before)) {
      assert.deepEqual(after[p].content, want.content, `${p} content`);
      assert.equal(after[p].mtimeNs, want.mtimeNs, `${p} mtime: got ${after[p].mtimeNs} want ${want.mtimeNs}`);
      assert.equal(after[p].mode, want.mode, `${p} mode`);
    }
    // …and the same as the file tools see it.
    const listed = (await ok('list_workspace_files', {})).structuredContent.entries.filter((e) => e.type === 'file');
    const norm = (l) => l.map((e) => ({ path: e.path, size: e.size, mod_time: e.mod_time })).sort((x, y) => x.path.localeCompare(y.path));
    assert.deepEqual(norm(listed), norm(listedBefore));
    const a = await ok('read_workspace_file', { path: 'a.txt' });
    assert.equal(a.structuredContent.content, 'alpha\n');
    const c = await ok('read_workspace_file', { path: 'dir/c.bin' });
    assert.deepEqual(Buffer.from(c.structuredContent.content, 'base64'), Buffer.from([0, 1, 2, 255, 254]));
  });

  test('diff after restore is empty; restoring again changes nothing', async () => {
    let r = await ok('diff_state_snapshot', { snapshot_id: first });
    assert.deepEqual([r.structuredContent.added, r.structuredContent.removed, r.structuredContent.modified], [[], [], []]);
    assert.equal(r.structuredContent.unchanged, 4);
    r = await ok('restore_state_snapshot', { snapshot_id: first });
    assert.deepEqual(r.structuredContent.written, []);
    assert.deepEqual(r.structuredContent.deleted, []);
    assert.equal(r.structuredContent.unchanged, 4);
  });

  test('list is newest first', async () => {
    await sleep(10);
    const second = (await ok('create_state_snapshot', { description: 'second' })).structuredContent.id;
    await sleep(10);
    const third = (await ok('create_state_snapshot', {})).structuredContent.id;
    const r = await ok('list_state_snapshots', {});
    const ids = r.structuredContent.snapshots.map((s) => s.id);
    assert.deepEqual(ids, [third, second, first]);
    const times = r.structuredContent.snapshots.map((s) => Date.parse(s.created_at));
    assert.ok(times[0] >= times[1] && times[1] >= times[2], `times ${times}`);
    assert.equal(r.structuredContent.snapshots[2].description, 'before the changes');
    const st = await srv.readJSON('sandbox://status');
    assert.equal(st.json.snapshots.count, 3);
  });

  test('delete, then the id is unknown everywhere', async () => {
    const r = await ok('delete_state_snapshot', { snapshot_id: first });
    assert.match(text(r), new RegExp(first));
    const ids = (await ok('list_state_snapshots', {})).structuredContent.snapshots.map((s) => s.id);
    assert.ok(!ids.includes(first));
    assert.equal(ids.length, 2);
    for (const tool of ['restore_state_snapshot', 'diff_state_snapshot', 'delete_state_snapshot']) {
      await toolError(tool, { snapshot_id: first }, /no snapshot/i);
    }
    // The workspace is untouched by delete.
    assert.equal(fs.readFileSync(path.join(ws, 'a.txt'), 'utf8'), 'alpha\n');
  });
});

describe('snapshot ids', () => {
  test('an unknown well-formed UUID is a tool error', async () => {
    for (const tool of ['restore_state_snapshot', 'diff_state_snapshot', 'delete_state_snapshot']) {
      await toolError(tool, { snapshot_id: '00000000-0000-4000-8000-000000000000' }, /no snapshot/i);
    }
  });

  test('malformed ids are tool errors and never reach the file system', async () => {
    for (const id of ['not-a-uuid', '../../../etc/passwd', '../snapshots/x', 'ffffffff-ffff-ffff-ffff-ffffffffffff/..', '', ' ']) {
      for (const tool of ['restore_state_snapshot', 'diff_state_snapshot', 'delete_state_snapshot']) {
        const r = await srv.call(tool, { snapshot_id: id });
        assert.equal(r.isError, true, `${tool}(${JSON.stringify(id)}): ${show(r)}`);
      }
    }
    assert.ok(fs.existsSync('/etc/passwd'));
  });
});

describe('tampered snapshots', () => {
  test('a snapshot whose paths escape the workspace is rejected and the workspace kept', async () => {
    await ok('write_workspace_file', { path: 'keep.txt', content: 'keep me' });
    const id = (await ok('create_state_snapshot', { description: 'to tamper' })).structuredContent.id;
    const doc = path.join(srv.env.snapshots, `${id}.json`);
    assert.ok(fs.existsSync(doc), `snapshot stored as ${doc}: ${fs.readdirSync(srv.env.snapshots)}`);
    const orig = fs.readFileSync(doc, 'utf8');
    const target = path.join(srv.env.root, 'escaped-by-restore.txt');
    for (const evil of ['../escaped-by-restore.txt', '/tmp/pyjail-e2e-escaped-abs.txt', 'dir/../../escaped-by-restore.txt']) {
      assert.ok(orig.includes('"keep.txt"'), 'the document names keep.txt');
      fs.writeFileSync(doc, orig.replace('"keep.txt"', JSON.stringify(evil)));
      await ok('write_workspace_file', { path: 'later.txt', content: 'written after the snapshot' });
      const r = await toolError('restore_state_snapshot', { snapshot_id: id });
      assert.match(text(r), /tamper|damaged|invalid|escape|outside/i);
      assert.equal(fs.existsSync(target), false, `${target} must not be created`);
      assert.equal(fs.existsSync('/tmp/pyjail-e2e-escaped-abs.txt'), false);
      // All or nothing: the workspace is as it was before the attempt.
      assert.equal(fs.readFileSync(path.join(ws, 'later.txt'), 'utf8'), 'written after the snapshot');
      assert.equal(fs.readFileSync(path.join(ws, 'keep.txt'), 'utf8'), 'keep me');
    }
    fs.writeFileSync(doc, orig);
    await ok('restore_state_snapshot', { snapshot_id: id });
    assert.equal(fs.existsSync(path.join(ws, 'later.txt')), false);
  });

  test('a snapshot with a wrong sha256 is rejected', async () => {
    const id = (await ok('create_state_snapshot', {})).structuredContent.id;
    const doc = path.join(srv.env.snapshots, `${id}.json`);
    const orig = fs.readFileSync(doc, 'utf8');
    fs.writeFileSync(doc, orig.replace('"keep me"', '"evil me"'));
    await ok('write_workspace_file', { path: 'keep.txt', content: 'changed' });
    await toolError('restore_state_snapshot', { snapshot_id: id }, /tamper|damaged|sha256|checksum|digest/i);
    assert.equal(fs.readFileSync(path.join(ws, 'keep.txt'), 'utf8'), 'changed');
  });

  test('restore does not follow a symlink out of the workspace', async () => {
    await ok('write_workspace_file', { path: 'sub/file.txt', content: 'inside' });
    const id = (await ok('create_state_snapshot', {})).structuredContent.id;
    // Replace the directory with a symlink to a directory outside.
    const outside = path.join(srv.env.root, 'outside-dir');
    fs.mkdirSync(outside, { recursive: true });
    fs.rmSync(path.join(ws, 'sub'), { recursive: true });
    fs.symlinkSync(outside, path.join(ws, 'sub'));
    await ok('restore_state_snapshot', { snapshot_id: id });
    assert.deepEqual(fs.readdirSync(outside), [], 'nothing written through the symlink');
    assert.equal(fs.lstatSync(path.join(ws, 'sub')).isDirectory(), true, 'sub is a real directory again');
    assert.equal(fs.readFileSync(path.join(ws, 'sub/file.txt'), 'utf8'), 'inside');
  });
});

describe('snapshot bad input', () => {
  test('wrong types and missing arguments', async () => {
    await toolError('create_state_snapshot', { description: 5 }, /description/);
    await toolError('restore_state_snapshot', {}, /snapshot_id/);
    await toolError('delete_state_snapshot', { snapshot_id: null }, /snapshot_id/);
    await toolError('list_state_snapshots', { extra: true }, /extra/);
  });
});
