// Benchmark of `pyjail serve --http` against stdio, with the official SDK's
// clients. Not part of `node --test`; run it by hand (as root):
//
//   cd test/e2e && PYJAIL_BIN=../../bin/pyjail node bench_http.mjs [--calls N] [--gap MS] [--sessions N] [--seconds S] [--rounds R]
//
// It measures the three goals of issue 13 on one machine in one run:
//   1. run_python("print(1+1)") round trips over stdio and over HTTP,
//      alternating call by call between the two servers so that both see
//      the same machine load; p50/p99 of each;
//   2. the HTTP server's RSS before and after N idle sessions (each
//      initialised, tools listed, its SSE stream open);
//   3. throughput of 8 tenants × 4 calls in flight against the same 32
//      callers on one tenant, alternating rounds of S seconds.

import { pidsInUidRange, sleep, startServer, text } from './harness.mjs';
import { startHTTPServer } from './http_harness.mjs';

import fs from 'node:fs';

function arg(name, def) {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : def;
}
const CALLS = arg('--calls', 200);
const GAP_MS = arg('--gap', 50);
const SESSIONS = arg('--sessions', 200);
const SECONDS = arg('--seconds', 10);
const ROUNDS = arg('--rounds', 3);
const TENANTS = 8;
const IN_FLIGHT = 4;

const pct = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
const median = (xs) => pct([...xs].sort((a, b) => a - b), 50);

function rssKiB(pid) {
  const m = /^VmRSS:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m[1]);
}

const ok = (r) => !r.isError && text(r).trim() === '2';
const print = { code: 'print(1+1)' };

async function timed(call) {
  const t0 = process.hrtime.bigint();
  const r = await call();
  return { ms: Number(process.hrtime.bigint() - t0) / 1e6, ok: ok(r) };
}

function summary(ms) {
  const s = [...ms].sort((a, b) => a - b);
  return `p50 ${pct(s, 50).toFixed(2)} ms, p99 ${pct(s, 99).toFixed(2)} ms, n ${s.length}`;
}

// Each tenant's calls hold IN_FLIGHT requests open on its clients for
// SECONDS; returns completed calls per second.
async function load(clients) {
  const end = Date.now() + SECONDS * 1000;
  const t0 = Date.now();
  let done = 0;
  let failed = 0;
  await Promise.all(clients.flatMap((c) => Array.from({ length: IN_FLIGHT }, async () => {
    while (Date.now() < end) {
      const r = await c.call('run_python', print);
      if (ok(r)) done++;
      else failed++;
    }
  })));
  return { perSec: done / ((Date.now() - t0) / 1000), failed };
}

async function main() {
  const names = Array.from({ length: TENANTS }, (_, i) => `t${i}`);
  console.log(`pyjail HTTP benchmark: ${CALLS} calls per transport ${GAP_MS} ms apart, ${SESSIONS} idle sessions, ${TENANTS}×${IN_FLIGHT} in flight for ${SECONDS} s × ${ROUNDS} rounds`);
  console.log(`host: ${fs.readFileSync('/proc/loadavg', 'utf8').trim()} (loadavg)`);
  const stdio = await startServer();
  const http = await startHTTPServer({ tenants: names });
  try {
    // 1. Latency, alternating call by call.
    const h = await http.connect('t0');
    for (let i = 0; i < 10; i++) {
      await stdio.call('run_python', print);
      await h.call('run_python', print);
    }
    const lat = { stdio: [], http: [] };
    let failures = 0;
    for (let i = 0; i < CALLS; i++) {
      for (const [name, call] of [['stdio', () => stdio.call('run_python', print)], ['http', () => h.call('run_python', print)]]) {
        await sleep(GAP_MS);
        const r = await timed(call);
        lat[name].push(r.ms);
        if (!r.ok) failures++;
      }
    }
    // The same for ping, which starts no jail: what the transport alone
    // costs, client side included.
    const ping = { stdio: [], http: [] };
    for (let i = 0; i < CALLS; i++) {
      for (const [name, client] of [['stdio', stdio.client], ['http', h.client]]) {
        await sleep(GAP_MS);
        const t0 = process.hrtime.bigint();
        await client.ping();
        ping[name].push(Number(process.hrtime.bigint() - t0) / 1e6);
      }
    }
    console.log(`ping stdio: ${summary(ping.stdio)}`);
    console.log(`ping http:  ${summary(ping.http)}`);
    const d = median(lat.http) - median(lat.stdio);
    console.log(`latency stdio: ${summary(lat.stdio)}`);
    console.log(`latency http:  ${summary(lat.http)}`);
    console.log(`latency: http p50 - stdio p50 = ${d.toFixed(2)} ms (goal ≤ 1 ms); ${failures} failed calls`);

    // 2. Idle sessions.
    await sleep(1000);
    const before = rssKiB(http.proc.pid);
    const idle = [];
    for (let i = 0; i < SESSIONS; i++) idle.push(await http.connect(names[i % TENANTS]));
    await sleep(2000);
    const after = rssKiB(http.proc.pid);
    const jails = pidsInUidRange(http.env.idRange).length;
    console.log(`idle sessions: RSS ${(before / 1024).toFixed(1)} MiB before, ${(after / 1024).toFixed(1)} MiB with ${SESSIONS} open: +${((after - before) / 1024).toFixed(1)} MiB (goal ≤ 20 MiB), ${((after - before) / SESSIONS).toFixed(1)} KiB a session; ${jails} jail processes`);
    for (const c of idle) await c.close();

    // 3. Many tenants vs one tenant, the same 32 callers.
    const spread = await Promise.all(names.map((n) => http.connect(n)));
    const single = await Promise.all(names.map(() => http.connect('t0')));
    await load(spread); // warm-up round
    const rates = { spread: [], single: [] };
    for (let r = 0; r < ROUNDS; r++) {
      // Alternate which goes first: a round right after another starts
      // from a pool the other left half refilled.
      const order = [['spread', spread], ['single', single]];
      if (r % 2 === 1) order.reverse();
      for (const [name, cs] of order) {
        const x = await load(cs);
        rates[name].push(x.perSec);
        if (x.failed) console.log(`  ${name}: ${x.failed} failed calls`);
      }
    }
    const ms = median(rates.spread);
    const m1 = median(rates.single);
    console.log(`throughput ${TENANTS} tenants × ${IN_FLIGHT}: ${rates.spread.map((x) => x.toFixed(1)).join(', ')} calls/s (median ${ms.toFixed(1)})`);
    console.log(`throughput 1 tenant × ${TENANTS * IN_FLIGHT}: ${rates.single.map((x) => x.toFixed(1)).join(', ')} calls/s (median ${m1.toFixed(1)})`);
    console.log(`throughput: many tenants / one tenant = ${(ms / m1).toFixed(3)} (goal within 15 %)`);
  } finally {
    await http.stop();
    await stdio.shutdown();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
