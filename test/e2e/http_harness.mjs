// Harness for the end-to-end tests of `pyjail serve --http`: starts the
// server as an operator would (a tokens file made with `pyjail token add`,
// a data directory, a metrics listener), and connects official SDK
// clients with StreamableHTTPClientTransport, one per tenant token.
//
// Every server gets its own state_dir, cgroup_parent and uid range (as in
// harness.mjs), its own data directory and loopback ports.

import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { BIN, cleanupEnv, collectLeftovers, makeEnv, saveStderr, sleep, timeoutAfter, waitNoJails } from './harness.mjs';

/** A free loopback TCP port. */
export async function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** Runs `pyjail token …` and returns its stdout. */
export function tokenCmd(...args) {
  return execFileSync(BIN, ['token', ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
}

/**
 * Starts `pyjail serve --http` with tenants (names, or {name, quota:
 * {key: value}, operator}) in a tokens file, and waits until /readyz says
 * ready. Returns a handle with the tokens, URLs, connect() and stop().
 */
export async function startHTTPServer({ tenants = ['alice', 'bob'], config = {}, extraArgs = [], env = makeEnv(config), dataDir, tokensFile, tokens = {}, port, metricsPort } = {}) {
  tokensFile ??= path.join(env.root, 'tokens.json');
  tokens = { ...tokens };
  for (const t of tenants) {
    const spec = typeof t === 'string' ? { name: t } : t;
    const args = ['add', '--tokens', tokensFile];
    if (spec.operator) args.push('--operator');
    for (const [k, v] of Object.entries(spec.quota ?? {})) args.push('--quota', `${k}=${v}`);
    tokens[spec.name] = tokenCmd(...args, spec.name);
  }
  dataDir ??= path.join(env.root, 'data');
  port ??= await freePort();
  metricsPort ??= await freePort();
  const args = [
    'serve', '--http', `127.0.0.1:${port}`, '--tokens', tokensFile, '--data-dir', dataDir,
    '--metrics', `127.0.0.1:${metricsPort}`, '--rootfs', 'host', '--config', env.configPath, ...extraArgs,
  ];
  const proc = spawn(BIN, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  proc.stderr.on('data', (b) => {
    stderr += b.toString();
    if (stderr.length > 1 << 20) stderr = stderr.slice(-(1 << 19));
  });
  const exited = new Promise((resolve) => proc.once('exit', (code, signal) => resolve({ code, signal })));
  const url = new URL(`http://127.0.0.1:${port}/mcp`);
  const metricsURL = `http://127.0.0.1:${metricsPort}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`pyjail serve --http exited ${proc.exitCode}:\n${stderr}`);
    try {
      const r = await fetch(`${metricsURL}/readyz`);
      if (r.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`pyjail serve --http never became ready:\n${stderr}`);
    }
    await sleep(100);
  }
  const clients = [];
  const h = {
    env, proc, url, port, metricsPort, metricsURL, tokens, tokensFile, dataDir, exited,
    stderr: () => stderr,
    /** A connected SDK client for tenant's token (or any bearer value). */
    async connect(tenant, { token = tokens[tenant], listTools = true } = {}) {
      const transport = new StreamableHTTPClientTransport(url, {
        requestInit: { headers: { Authorization: `Bearer ${token}` } },
      });
      const client = new Client({ name: `pyjail-e2e-${tenant}`, version: '1.0.0' }, { capabilities: {} });
      await client.connect(transport);
      if (listTools) await client.listTools();
      const c = {
        client, transport,
        call: (name, a = {}, options = {}) => client.callTool({ name, arguments: a }, undefined, options),
        async readJSON(uri) {
          const r = await client.readResource({ uri });
          return JSON.parse(r.contents[0].text);
        },
        close: () => client.close().catch(() => {}),
      };
      clients.push(c);
      return c;
    },
    /** A raw POST to the MCP endpoint: the HTTP status and body. */
    async post(body, headers = {}) {
      const r = await fetch(url, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers },
        body: typeof body === 'string' ? body : JSON.stringify(body),
      });
      return { status: r.status, headers: r.headers, text: await r.text() };
    },
    async metrics() {
      return (await fetch(`${metricsURL}/metrics`)).text();
    },
    /** SIGTERM, then waits for the exit. */
    async stop({ signal = 'SIGTERM', keepEnv = false } = {}) {
      for (const c of clients) await c.close();
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      const how = await Promise.race([exited, timeoutAfter(30_000).then(() => ({ code: null, signal: 'timeout' }))]);
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
      saveStderr(stderr);
      const leftJails = await waitNoJails(env.idRange, 5000);
      const leftovers = collectLeftovers(env);
      const leftParents = keepEnv ? [] : cleanupEnv(env);
      return { ...how, leftJails, ...leftovers, leftParents };
    },
  };
  return h;
}

/** Reads one sample from Prometheus text: the value of name{labels}. */
export function metricValue(text, name, labels = {}) {
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-z_:]+)(\{([^}]*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = (m[3] ?? '').split(',').filter(Boolean);
    if (want.every((w) => have.includes(w))) return Number(m[4]);
  }
  return 0;
}

// The SDK for tests outside this directory (test/scaleout), whose imports
// do not resolve to this directory's node_modules.
export { Client, StreamableHTTPClientTransport, fs };
