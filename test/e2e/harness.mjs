// Test harness for the end-to-end tests: starts `pyjail serve` the way an
// MCP host does (the official SDK's StdioClientTransport, which passes only
// HOME, LOGNAME, PATH, SHELL, TERM and USER), connects a Client and tears
// everything down again: the server, its jails, its cgroups and its state
// directory.
//
// Every server gets its own workspace, snapshot directory, state_dir,
// cgroup_parent and uid range, so a test run never touches a production
// server's jails and "no jail process left" can be checked by uid without
// being fooled by other pyjail processes on the host.

import { spawn } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';

const here = path.dirname(fileURLToPath(import.meta.url));

/** The server binary: $PYJAIL_BIN, else the repository's bin/pyjail. */
export const BIN = path.resolve(here, process.env.PYJAIL_BIN || '../../bin/pyjail');

/** Size of the uid/gid range each test server maps its jails to. */
const ID_RANGE = 65536;
/** Code runs as this uid inside the jail (policy default). */
const SANDBOX_ID = 1000;

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A sleep that does not keep node alive: for the deadline side of a race. */
export const timeoutAfter = (ms) => new Promise((r) => setTimeout(r, ms).unref());

/**
 * Creates a fresh, isolated environment for one server: temp workspace and
 * snapshot directories, a config file with a private state_dir,
 * cgroup_parent and uid range. `config` is merged into the config file.
 */
export function makeEnv(config = {}) {
  const tag = `${process.pid}-${randomBytes(4).toString('hex')}`;
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'pyjail-e2e-'));
  const workspace = path.join(root, 'workspace');
  const snapshots = path.join(root, 'snapshots');
  fs.mkdirSync(workspace);
  fs.mkdirSync(snapshots);
  // Host ids 300,000,000 + k·65536: clear of the default range (200,000,000)
  // that a production server or other test runs use.
  const hostID = 300_000_000 + randomInt(0, 10_000) * ID_RANGE;
  const cfg = {
    state_dir: `/run/pyjail-e2e-${tag}`,
    cgroup_parent: `/pyjail-e2e-${tag}`,
    id_map: { host_id: hostID, size: ID_RANGE, sandbox_id: SANDBOX_ID },
    ...config,
  };
  const configPath = path.join(root, 'config.json');
  fs.writeFileSync(configPath, JSON.stringify(cfg, null, 2));
  liveEnvs.add(cfg.cgroup_parent);
  return {
    root,
    workspace,
    snapshots,
    configPath,
    config: cfg,
    stateDir: cfg.state_dir,
    cgroupParent: cfg.cgroup_parent,
    idRange: [hostID, hostID + ID_RANGE],
    sandboxUid: hostID + SANDBOX_ID,
  };
}

/** The `pyjail serve` arguments for env. */
export function serveArgs(env, { noWarm = false, extraArgs = [] } = {}) {
  const args = [
    'serve',
    '--workspace', env.workspace,
    '--snapshots', env.snapshots,
    '--rootfs', 'host',
    '--config', env.configPath,
  ];
  if (noWarm) args.push('--no-warm');
  return args.concat(extraArgs);
}

/** The environment a real MCP host gives a stdio server. */
export function hostEnv() {
  return getDefaultEnvironment();
}

/**
 * Pids of the processes whose real, effective, saved or fs uid lies in
 * [lo, hi): the jails of the server that owns that range.
 */
export function pidsInUidRange([lo, hi]) {
  const out = [];
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    let status;
    try {
      status = fs.readFileSync(`/proc/${d}/status`, 'utf8');
    } catch {
      continue; // exited meanwhile
    }
    const m = /^Uid:\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)/m.exec(status);
    if (!m) continue;
    if (m.slice(1).some((u) => Number(u) >= lo && Number(u) < hi)) out.push(Number(d));
  }
  return out;
}

/** Polls until no process is left in the uid range; returns what is left. */
export async function waitNoJails(range, timeoutMs = 5000) {
  const deadline = Date.now() + timeoutMs;
  let left = pidsInUidRange(range);
  while (left.length > 0 && Date.now() < deadline) {
    await sleep(100);
    left = pidsInUidRange(range);
  }
  return left;
}

/** Describes processes for an assertion message. */
export function describePids(pids) {
  return pids
    .map((p) => {
      try {
        return `${p}: ${fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').replaceAll('\0', ' ')}`;
      } catch {
        return `${p}: (gone)`;
      }
    })
    .join('\n');
}

/** The cgroup directories of cgroup_parent on every mounted hierarchy. */
export function cgroupDirs(cgroupParent) {
  const base = '/sys/fs/cgroup';
  const dirs = [];
  const unified = fs.existsSync(path.join(base, 'cgroup.controllers'));
  if (unified) {
    dirs.push(path.join(base, cgroupParent));
  } else {
    for (const h of fs.readdirSync(base)) {
      dirs.push(path.join(base, h, cgroupParent));
    }
  }
  return dirs.filter((d) => fs.existsSync(d));
}

/** Child cgroups (one per jail) still present under cgroup_parent. */
export function leftoverCgroups(cgroupParent) {
  const out = [];
  for (const d of cgroupDirs(cgroupParent)) {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      if (e.isDirectory()) out.push(path.join(d, e.name));
    }
  }
  return out;
}

/**
 * Polls until no jail cgroup is left under cgroup_parent; returns what is
 * left. A jail's cgroup goes after its processes: the supervisor reads the
 * cgroup's counters and the workspace changes first, then destroys it.
 */
export async function waitNoCgroups(cgroupParent, timeoutMs = 5000) {
  const deadline = Date.now() + timeoutMs;
  let left = leftoverCgroups(cgroupParent);
  while (left.length > 0 && Date.now() < deadline) {
    await sleep(100);
    left = leftoverCgroups(cgroupParent);
  }
  return left;
}

/** Mount points under the env's directories (jail roots, binds). */
export function leftoverMounts(env) {
  const mi = fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n');
  return mi
    .map((l) => l.split(' ')[4])
    .filter((mp) => mp && (mp.startsWith(env.stateDir + '/') || mp === env.stateDir || mp.startsWith(env.root + '/')));
}

/**
 * Per-jail entries left in the state dir: anything in containers/ (one
 * libcontainer state dir per jail) and anything else than the per-server
 * containers/, rootfs/, the installed runner (runner-<hash>) and sessions/
 * (the keys of live sessions, kept so that the next server can say
 * server_restart to them).
 */
export function leftoverState(stateDir) {
  if (!fs.existsSync(stateDir)) return [];
  const out = [];
  for (const e of fs.readdirSync(stateDir)) {
    if (e === 'containers') {
      for (const c of fs.readdirSync(path.join(stateDir, e))) out.push(`containers/${c}`);
    } else if (e !== 'rootfs' && e !== 'sessions' && !/^runner-[0-9a-f]+$/.test(e)) {
      out.push(e);
    }
  }
  return out;
}

/** What a stopped server left behind: cgroups, state entries, mounts. */
export function collectLeftovers(env) {
  return {
    leftCgroups: leftoverCgroups(env.cgroupParent),
    leftState: leftoverState(env.stateDir),
    leftMounts: leftoverMounts(env),
  };
}

/**
 * Removes what a test server may have left on the host: per-jail cgroups
 * (deepest first), the cgroup_parent directories, the state dir and the
 * temp root. It never touches anything outside this env's own names.
 */
export function cleanupEnv(env) {
  const rmdirTree = (dir) => {
    let entries = [];
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) if (e.isDirectory()) rmdirTree(path.join(dir, e.name));
    try {
      fs.rmdirSync(dir); // cgroupfs: rmdir only, never unlink the files
    } catch {
      /* busy (a jail's last process still exiting) or gone: retried below */
    }
  };
  // The cgroup_parent directories themselves too (issue 27: they used to
  // stay behind, empty): a cgroup is busy until its last process is
  // reaped, so retry for a bounded time, then report what stayed.
  for (let i = 0; i < 100 && cgroupDirs(env.cgroupParent).length > 0; i++) {
    if (i > 0) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20);
    for (const d of cgroupDirs(env.cgroupParent)) rmdirTree(d);
  }
  fs.rmSync(env.stateDir, { recursive: true, force: true });
  fs.rmSync(env.root, { recursive: true, force: true });
  liveEnvs.delete(env.cgroupParent);
  return cgroupDirs(env.cgroupParent);
}

/**
 * The cgroup_parent of every env this process made and has not cleaned
 * up. When the test file's process exits, any cgroup directory of them,
 * or any other pyjail-e2e-<this pid>-* parent, still on the host fails
 * the file: the leak check of cgroup parents (issue 27).
 */
const liveEnvs = new Set();
process.on('exit', () => {
  const base = '/sys/fs/cgroup';
  const prefix = `pyjail-e2e-${process.pid}-`;
  const left = [];
  let hierarchies = [''];
  if (!fs.existsSync(path.join(base, 'cgroup.controllers'))) {
    try {
      hierarchies = fs.readdirSync(base);
    } catch {
      hierarchies = [];
    }
  }
  for (const h of hierarchies) {
    let names = [];
    try {
      names = fs.readdirSync(path.join(base, h));
    } catch {
      continue;
    }
    for (const n of names) if (n.startsWith(prefix)) left.push(path.join(base, h, n));
  }
  if (left.length > 0) {
    process.stderr.write(`pyjail e2e: cgroup parents left on the host by this test file (${liveEnvs.size} env(s) never cleaned up):\n  ${left.join('\n  ')}\n`);
    process.exitCode = 1;
  }
});

/**
 * Starts `pyjail serve` through the SDK's StdioClientTransport and connects
 * a Client. The returned handle has the client, the child process, the
 * server's captured stderr and helpers; `close()` shuts down gracefully
 * (stdin EOF) and reports how the process ended.
 */
export async function startServer({ env = makeEnv(), noWarm = false, extraArgs = [], listTools = true } = {}) {
  const transport = new StdioClientTransport({
    command: BIN,
    args: serveArgs(env, { noWarm, extraArgs }),
    stderr: 'pipe',
  });
  let stderr = '';
  transport.stderr.on('data', (b) => {
    stderr += b.toString();
    // Keep the tail only: enough to explain a failure.
    if (stderr.length > 1 << 20) stderr = stderr.slice(-(1 << 19));
  });
  const client = new Client({ name: 'pyjail-e2e', version: '1.0.0' }, { capabilities: {} });
  try {
    await client.connect(transport);
  } catch (err) {
    await transport.close().catch(() => {});
    cleanupEnv(env);
    throw new Error(`starting ${BIN}: ${err.message}\nserver stderr:\n${stderr}`);
  }
  // The child process: the SDK exposes only its pid, but the exit code is
  // what "clean exit" means, so hold on to the process object (SDK 1.32.2).
  const proc = transport._process;
  // Raw JSON for arguments JavaScript cannot serialise (JSON.stringify
  // overflows its stack at a few thousand levels of nesting): h.raw(text)
  // returns a placeholder string, and sending swaps the text in. The rest
  // of the message, its id and the reading of the answer stay the SDK's.
  const raws = [];
  const sendOrig = transport.send.bind(transport);
  transport.send = (message) => {
    if (raws.length === 0) return sendOrig(message);
    let json = JSON.stringify(message).replace(/"@@raw(\d+)@@"/g, (_, i) => raws[Number(i)]) + '\n';
    return new Promise((resolve) => {
      if (proc.stdin.write(json)) resolve();
      else proc.stdin.once('drain', resolve);
    });
  };
  const exited = new Promise((resolve) => {
    if (!proc) return resolve({ code: null, signal: null });
    if (proc.exitCode !== null || proc.signalCode !== null) {
      return resolve({ code: proc.exitCode, signal: proc.signalCode });
    }
    proc.once('exit', (code, signal) => resolve({ code, signal, at: Date.now() }));
  });
  // With the tools listed once, the SDK client checks every tool result's
  // structuredContent against the tool's declared outputSchema.
  let tools = null;
  if (listTools) tools = (await client.listTools()).tools;

  const h = {
    env,
    client,
    transport,
    proc,
    pid: transport.pid,
    tools,
    exited,
    stderr: () => stderr,
    /** A placeholder for raw JSON text in call arguments (see above). */
    raw(text) {
      raws.push(text);
      return `@@raw${raws.length - 1}@@`;
    },
    /** tools/call; returns the CallToolResult (isError results included). */
    call: (name, args = {}, options = {}) => client.callTool({ name, arguments: args }, undefined, options),
    /** Reads a resource and parses its single JSON text content. */
    async readJSON(uri) {
      const r = await client.readResource({ uri });
      if (r.contents.length !== 1) throw new Error(`${uri}: ${r.contents.length} contents`);
      return { json: JSON.parse(r.contents[0].text), raw: r };
    },
    /** Graceful close: stdin EOF, as a host does; SIGTERM after 2 s (SDK). */
    async close() {
      const start = Date.now();
      await client.close();
      const how = await Promise.race([exited, timeoutAfter(10_000).then(() => ({ code: null, signal: 'timeout' }))]);
      return { ...how, ms: (how.at ?? Date.now()) - start };
    },
    /** close(), then checks no jail is left and removes the env. */
    async shutdown() {
      let how;
      try {
        how = await h.close();
      } finally {
        if (proc && proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
        saveStderr(stderr);
      }
      const left = await waitNoJails(env.idRange, 5000);
      const leftovers = collectLeftovers(env);
      const leftParents = cleanupEnv(env);
      return { ...how, leftJails: left, ...leftovers, leftParents };
    },
  };
  return h;
}

/**
 * With PYJAIL_E2E_STDERR_DIR set, each server's stderr (its structured log)
 * is saved there when it stops, for diagnosing a failed run.
 */
export function saveStderr(stderr) {
  const dir = process.env.PYJAIL_E2E_STDERR_DIR;
  if (!dir) return;
  fs.mkdirSync(dir, { recursive: true });
  const name = `${path.basename(process.argv[1] || 'e2e')}-${process.pid}-${Date.now()}.log`;
  fs.writeFileSync(path.join(dir, name), stderr);
}

/** The concatenated text content of a tool result. */
export function text(result) {
  return (result.content || [])
    .filter((c) => c.type === 'text')
    .map((c) => c.text)
    .join('');
}

/** A one-line description of a result for assertion messages. */
export function show(result) {
  const s = JSON.stringify(result);
  return s.length > 2000 ? s.slice(0, 2000) + '…' : s;
}

/**
 * Spawns the server with child_process (not the SDK), for tests that
 * write raw bytes to its stdin. Returns the process plus a line reader for
 * the JSON-RPC messages on stdout.
 */
export function spawnRaw(env, opts = {}) {
  const proc = spawn(BIN, serveArgs(env, opts), { stdio: ['pipe', 'pipe', 'pipe'], env: hostEnv() });
  let stderr = '';
  proc.stderr.on('data', (b) => {
    stderr += b.toString();
    if (stderr.length > 1 << 20) stderr = stderr.slice(-(1 << 19));
  });
  const messages = [];
  const waiters = [];
  let buf = '';
  proc.stdout.on('data', (b) => {
    buf += b.toString();
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i).trim();
      buf = buf.slice(i + 1);
      if (!line) continue;
      let msg;
      try {
        msg = JSON.parse(line);
      } catch {
        msg = { unparseable: line };
      }
      messages.push(msg);
      for (const w of waiters.splice(0)) w();
    }
  });
  const exited = new Promise((resolve) => proc.once('exit', (code, signal) => resolve({ code, signal, at: Date.now() })));
  return {
    proc,
    exited,
    messages,
    stderr: () => stderr,
    send(obj) {
      proc.stdin.write((typeof obj === 'string' ? obj : JSON.stringify(obj)) + '\n');
    },
    /** Waits for the first message matching pred (already received or not). */
    async waitFor(pred, timeoutMs = 15_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const m = messages.find(pred);
        if (m) return m;
        if (Date.now() > deadline) throw new Error(`no matching message in ${timeoutMs} ms; got ${JSON.stringify(messages)}\nstderr:\n${stderr}`);
        await new Promise((r) => {
          waiters.push(r);
          setTimeout(r, 100);
        });
      }
    },
  };
}

/** The initialize request a client sends first. */
export function initializeRequest(id = 1) {
  return {
    jsonrpc: '2.0',
    id,
    method: 'initialize',
    params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw-e2e', version: '1.0.0' } },
  };
}
