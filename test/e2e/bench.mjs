// Latency benchmark of `pyjail serve` through the official MCP stdio client.
// Not part of `node --test`; run it by hand:
//
//   cd test/e2e && PYJAIL_BIN=../../bin/pyjail node bench.mjs [--calls N] [--gap MS] [--seconds S] [--clients C] [--no-warm] [--only REGEX]
//
// Measures the round trip of sequential tool calls (p50/p99/mean over N calls
// per case), throughput of C concurrent clients (each its own server, as
// MCP hosts run one stdio server per client) calling print(1+1) for S
// seconds, the server's idle RSS and the RSS of its warm jails.

import fs from 'node:fs';

import { describePids, pidsInUidRange, sleep, startServer, text } from './harness.mjs';

function arg(name, def) {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : def;
}
const CALLS = Number(arg('--calls', 200));
// --gap MS waits between sequential calls, as a model does between tool
// calls; 0 (the default) calls back to back.
const GAP_MS = Number(arg('--gap', 0));
const SECONDS = Number(arg('--seconds', 10));
const CLIENTS = Number(arg('--clients', 4));
const NO_WARM = process.argv.includes('--no-warm');
// --only REGEX keeps the latency cases whose name matches.
const ONLY = new RegExp(arg('--only', '.'));

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

const cases = [
  { name: 'run_python print(1+1)', tool: 'run_python', args: { code: 'print(1+1)' }, check: (r) => text(r).trim() === '2' },
  {
    name: 'run_python numpy arange(10**6).sum()',
    tool: 'run_python',
    args: { code: 'import numpy as np\nnp.arange(10**6).sum()' },
    check: (r) => /499999500000/.test(r.structuredContent?.value ?? ''),
  },
  {
    name: 'run_python pandas groupby',
    tool: 'run_python',
    args: {
      code: "import pandas as pd\ndf = pd.DataFrame({'k': ['a', 'b', 'a', 'c', 'b', 'a'], 'v': [1, 2, 3, 4, 5, 6]})\nprint(df.groupby('k')['v'].sum().to_dict())",
    },
    check: (r) => text(r).trim() === "{'a': 10, 'b': 7, 'c': 4}",
  },
  { name: 'validate_json user', tool: 'validate_json', args: { data: userExample, schema_name: 'user' }, check: (r) => r.structuredContent?.valid === true },
  // The workspace profile: the same print, a 1 MB CSV read from the
  // workspace and grouped, and a figure saved into the workspace (and
  // returned as a PNG image).
  { name: 'run_sandbox_code print(1+1)', tool: 'run_sandbox_code', args: { code: 'print(1+1)' }, check: (r) => text(r).trim() === '2' },
  {
    name: 'run_sandbox_code read_csv 1 MB + groupby',
    tool: 'run_sandbox_code',
    setup: async (srv) => {
      const rows = ['k,v'];
      for (let i = 0; rows.join('\n').length < 1 << 20; i++) rows.push(`${'abcdefg'[i % 7]},${i}`);
      const r = await srv.call('write_workspace_file', { path: 'data.csv', content: rows.join('\n') + '\n' });
      if (r.isError) throw new Error(`writing data.csv: ${text(r)}`);
    },
    args: { code: "import pandas as pd\ndf = pd.read_csv('data.csv')\nprint(len(df), df.groupby('k')['v'].sum()['a'])" },
    check: (r) => /^\d{5,} \d+$/.test(text(r).trim().split('\n')[0]),
  },
  {
    name: 'run_sandbox_code matplotlib plot saved + PNG',
    tool: 'run_sandbox_code',
    args: { code: "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2, 4])\nplt.savefig('plot.png')" },
    check: (r) => r.content?.some((c) => c.type === 'image' && c.mimeType === 'image/png') && r.structuredContent?.files?.created?.length + r.structuredContent?.files?.modified?.length >= 1,
  },
  // Sessions (issue 14): a call in a session that exists, and the first
  // call of a new session (closed again after each measured call, outside
  // the timing), against the warm sessionless print(1+1) above.
  {
    name: 'run_python session print(x)',
    tool: 'run_python',
    setup: async (srv) => {
      const r = await srv.call('run_python', { code: 'x = 41', session: 'bench' });
      if (r.isError) throw new Error(`starting the session: ${text(r)}`);
    },
    args: { code: 'print(x)', session: 'bench' },
    check: (r) => r.structuredContent?.stdout?.trim() === '41' && r.structuredContent?.session?.state === 'preserved',
  },
  {
    name: 'run_python first call of a session',
    tool: 'run_python',
    args: (i) => ({ code: 'print(1+1)', session: `first-${i}` }),
    after: (srv, i) => srv.call('close_session', { session: `first-${i}` }),
    check: (r) => r.structuredContent?.stdout?.trim() === '2' && r.structuredContent?.session?.state === 'new',
  },
];

const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];

function rssKiB(pid) {
  try {
    const m = /^VmRSS:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

function fmtMiB(kib) {
  return kib == null ? 'n/a' : `${(kib / 1024).toFixed(1)} MiB`;
}

async function waitWarm(srv, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { json } = await srv.readJSON('sandbox://status');
    const pool = json.warm_pool;
    if (!pool) return null;
    // Full, and a fork server's idle jails done with their warm-up (a
    // server whose warm-up failed has jails that never finish it).
    const full = Object.values(pool).every((p) => (p.idle >= p.size || p.budget_limited) &&
      (!p.fork_server || p.fork_server.warmup_error || p.fork_server.warmed >= p.idle));
    if (full || Date.now() > deadline) return pool;
    await sleep(200);
  }
}

async function latency(srv, c) {
  if (c.setup) await c.setup(srv);
  // Warm-up calls are not measured; the measured calls start from a full,
  // warmed pool, as after any pause.
  const argsOf = (i) => (typeof c.args === 'function' ? c.args(i) : c.args);
  for (let i = 0; i < 5; i++) {
    await srv.call(c.tool, argsOf(-1 - i));
    if (c.after) await c.after(srv, -1 - i);
  }
  if (!NO_WARM) await waitWarm(srv);
  const ms = [];
  let failures = 0;
  for (let i = 0; i < CALLS; i++) {
    if (GAP_MS > 0) await sleep(GAP_MS);
    const t0 = process.hrtime.bigint();
    const r = await srv.call(c.tool, argsOf(i));
    ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
    if (c.after) await c.after(srv, i);
    if (r.isError || !c.check(r)) {
      failures++;
      if (failures <= 3) console.error(`${c.name}: unexpected result ${JSON.stringify(r).slice(0, 400)}`);
    }
  }
  ms.sort((a, b) => a - b);
  const mean = ms.reduce((a, b) => a + b, 0) / ms.length;
  return { name: c.name, n: ms.length, p50: pct(ms, 50), p99: pct(ms, 99), mean, min: ms[0], max: ms.at(-1), failures };
}

// Throughput of CLIENTS concurrent callers of print(1+1) with tool: either
// each with its own stdio server (how MCP hosts run them), or all sharing
// one server (concurrent requests on one connection, limited by
// max_concurrent).
async function throughput(shared, tool) {
  const servers = [];
  if (shared) {
    const s = await startServer({ noWarm: NO_WARM });
    for (let i = 0; i < CLIENTS; i++) servers.push(s);
  } else {
    for (let i = 0; i < CLIENTS; i++) servers.push(await startServer({ noWarm: NO_WARM }));
  }
  try {
    if (!NO_WARM) await Promise.all(servers.map((s) => waitWarm(s)));
    let done = 0;
    let failures = 0;
    const end = Date.now() + SECONDS * 1000;
    const t0 = Date.now();
    await Promise.all(
      servers.map(async (s) => {
        while (Date.now() < end) {
          const r = await s.call(tool, { code: 'print(1+1)' });
          if (r.isError || text(r).trim() !== '2') failures++;
          else done++;
        }
      }),
    );
    const secs = (Date.now() - t0) / 1000;
    return { done, failures, secs, perSec: done / secs };
  } finally {
    for (const s of new Set(servers)) await s.shutdown();
  }
}

async function main() {
  console.log(`pyjail MCP benchmark: ${CALLS} sequential calls per case${GAP_MS ? `, ${GAP_MS} ms apart` : ', back to back'}, ${CLIENTS} clients × ${SECONDS} s throughput${NO_WARM ? ', --no-warm' : ''}`);
  console.log(`host: ${fs.readFileSync('/proc/loadavg', 'utf8').trim()} (loadavg), ${(await import('node:os')).cpus().length} CPUs`);
  const srv = await startServer({ noWarm: NO_WARM });
  const rows = [];
  let idle;
  let warm = [];
  try {
    // Idle RSS: after startup has settled and the warm pools are full.
    const pool = NO_WARM ? null : await waitWarm(srv);
    await sleep(1000);
    idle = rssKiB(srv.pid);
    warm = pidsInUidRange(srv.env.idRange).map((pid) => ({ pid, rss: rssKiB(pid), cmd: describePids([pid]) }));
    if (pool) console.log(`warm pool: ${JSON.stringify(pool)}`);

    for (const c of cases.filter((c) => ONLY.test(c.name))) {
      const r = await latency(srv, c);
      rows.push(r);
      console.log(`  ${r.name}: p50 ${r.p50.toFixed(1)} ms`);
    }
    const afterRss = rssKiB(srv.pid);
    console.log('');
    console.log('| case | calls | p50 ms | p99 ms | mean ms | min ms | max ms | failures |');
    console.log('|---|---:|---:|---:|---:|---:|---:|---:|');
    for (const r of rows) {
      console.log(`| ${r.name} | ${r.n} | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} | ${r.mean.toFixed(1)} | ${r.min.toFixed(1)} | ${r.max.toFixed(1)} | ${r.failures} |`);
    }
    console.log('');
    console.log(`server idle RSS (after startup, pools full): ${fmtMiB(idle)}; after the latency runs: ${fmtMiB(afterRss)}`);
    if (warm.length) {
      const total = warm.reduce((a, w) => a + (w.rss || 0), 0);
      console.log(`warm jail processes: ${warm.length}, RSS total ${fmtMiB(total)} (${warm.map((w) => fmtMiB(w.rss)).join(', ')})`);
    } else {
      console.log('warm jail processes: none visible');
    }
  } finally {
    await srv.shutdown();
  }
  if (SECONDS <= 0) return;
  for (const tool of ['run_python', 'run_sandbox_code']) {
    for (const shared of [false, true]) {
      const tp = await throughput(shared, tool);
      const how = shared ? 'sharing one server' : 'one server each';
      console.log(`throughput: ${CLIENTS} concurrent callers (${how}) × ${tool} print(1+1) for ${tp.secs.toFixed(1)} s: ${tp.done} ok, ${tp.failures} failed, ${tp.perSec.toFixed(1)} executions/s`);
    }
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
