// Opt-in, not part of `make e2e`: the MCP Inspector's web UI (2.x) driven
// "by hand" through pyjail's sign-in by headless Chromium. It starts what
// signin_demo.mjs starts (oidc-provider with sign-in and consent pages,
// `pyjail serve --http` signed in through it) and the Inspector, then:
// add the server (Streamable HTTP), connect, the provider's sign-in and
// consent pages, back in the Inspector: tools, run_python print(1+1), the
// connection's OAuth details. A screenshot per step into --shots.
//
//   apt-get install chromium; cd test/e2e/inspector && npm ci
//   node inspector_flow.mjs [--shots DIR] [--user alice]    # as root, after make build
//
// Requests from the page to anything but loopback are aborted (the
// Inspector's page asks for web fonts). Exits non-zero at the first step
// that does not happen, with the page's text and console errors.

import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import puppeteer from 'puppeteer-core';

import { makeEnv } from '../harness.mjs';
import { freePort, metricValue, startHTTPServer } from '../http_harness.mjs';
import { INTROSPECTION_CLIENT, startAuthServer } from '../oidc_harness.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const { values: o } = parseArgs({
  options: {
    user: { type: 'string', default: 'alice' }, shots: { type: 'string', default: path.join(here, 'shots') },
    chromium: { type: 'string', default: '/usr/bin/chromium' }, name: { type: 'string', default: 'pyjail' },
  },
});
fs.mkdirSync(o.shots, { recursive: true });

const t0 = Date.now();
const log = (s) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1)}s] ${s}`);

// The identity provider and pyjail, as signin_demo.mjs.
const port = await freePort();
const resource = `http://127.0.0.1:${port}/mcp`;
const users = {
  alice: { email: 'alice@example.com', rights: ['run', 'workspace'] },
  ops: { email: 'ops@example.com', rights: ['run', 'workspace', 'operator'] },
};
const as = await startAuthServer({ users, resources: [resource], defaultUser: o.user, forms: true });
const env = makeEnv({});
const secretFile = path.join(env.root, 'introspection-secret');
fs.writeFileSync(secretFile, as.secret, { mode: 0o600 });
env.config.auth = {
  resource,
  issuers: [{ issuer: as.issuer, introspection: { client_id: INTROSPECTION_CLIENT, client_secret_file: secretFile } }],
  tenants: { claim: 'email', map: { 'alice@example.com': 'alice', 'ops@example.com': 'ops' } },
};
fs.writeFileSync(env.configPath, JSON.stringify(env.config, null, 2));
const srv = await startHTTPServer({ env, port, tenants: [] });
log(`pyjail ${resource}, identity provider ${as.issuer}`);

// The Inspector, with a home of its own (its server list and storage).
const inspectorPort = await freePort();
const apiToken = crypto.randomBytes(16).toString('hex');
const inspectorHome = fs.mkdtempSync(path.join(os.tmpdir(), 'pyjail-inspector-'));
const inspector = spawn(process.execPath, [path.join(here, 'node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js'), '--web'], {
  env: {
    ...process.env, HOME: inspectorHome, HOST: '127.0.0.1', CLIENT_PORT: String(inspectorPort),
    MCP_SANDBOX_PORT: String(await freePort()), MCP_INSPECTOR_API_TOKEN: apiToken,
    MCP_AUTO_OPEN_ENABLED: 'false', MCP_INSPECTOR_SECRET_STORE: 'memory',
  },
  stdio: ['ignore', 'pipe', 'pipe'],
});
let inspectorOut = '';
inspector.stdout.on('data', (d) => { inspectorOut += d; });
inspector.stderr.on('data', (d) => { inspectorOut += d; });
for (let i = 0; !inspectorOut.includes('up and running'); i++) {
  if (i > 300 || inspector.exitCode !== null) throw new Error(`the Inspector did not start:\n${inspectorOut}`);
  await new Promise((r) => setTimeout(r, 100));
}
const inspectorURL = `http://127.0.0.1:${inspectorPort}/?MCP_INSPECTOR_API_TOKEN=${apiToken}`;
const inspectorVersion = JSON.parse(fs.readFileSync(path.join(here, 'node_modules/@modelcontextprotocol/inspector/package.json'))).version;
log(`Inspector ${inspectorVersion} at http://127.0.0.1:${inspectorPort}`);
o.inspector = inspectorURL;
o.mcp = resource;

const browser = await puppeteer.launch({ executablePath: o.chromium, headless: true, args: ['--no-sandbox', '--disable-gpu'] });
const ctx = await browser.createBrowserContext();
const page = await ctx.newPage();
await page.setViewport({ width: 1400, height: 1000 });
page.setDefaultTimeout(30_000);
await page.setRequestInterception(true);
page.on('request', (r) => {
  const u = new URL(r.url());
  const loop = ['127.0.0.1', 'localhost', '[::1]'].includes(u.hostname);
  if (!loop && !['data:', 'blob:'].includes(u.protocol)) r.abort();
  else r.continue();
});
const consoleLines = [];
page.on('console', (m) => consoleLines.push(`${m.type()}: ${m.text()}`));

let n = 0;
async function shot(what) {
  n += 1;
  const file = path.join(o.shots, `${String(n).padStart(2, '0')}-${what}.png`);
  await page.screenshot({ path: file });
  log(`screenshot ${file}`);
}
const pause = (ms) => new Promise((r) => setTimeout(r, ms));
const text = () => page.evaluate(() => document.body.innerText);
// Mantine inputs re-render on every change: set the value in one event.
async function fill(selector, value) {
  await page.$eval(selector, (e, v) => {
    const proto = e instanceof HTMLTextAreaElement ? HTMLTextAreaElement.prototype : HTMLInputElement.prototype;
    Object.getOwnPropertyDescriptor(proto, 'value').set.call(e, v);
    e.dispatchEvent(new Event('input', { bubbles: true }));
  }, value);
}
async function inputByLabel(label) {
  const id = await page.evaluate((l) => [...document.querySelectorAll('label')].find((x) => x.textContent.trim().replace(/\s*\*$/, '') === l)?.htmlFor, label);
  if (!id) throw new Error(`no input labelled ${label}`);
  return `[id="${id}"]`;
}

try {
  await page.goto(o.inspector, { waitUntil: 'networkidle2' });
  await page.waitForFunction(() => document.body.innerText.includes('Add Servers'));
  await shot('inspector-home');

  await page.locator('button ::-p-text(Add Servers)').click();
  await page.locator('::-p-text(+ Add manually)').click();
  await page.waitForSelector('[role=dialog] input');
  await fill(await inputByLabel('Server ID'), o.name);
  await page.click(await inputByLabel('Transport'));
  await page.locator('[role=option] ::-p-text(streamable-http)').click();
  await page.waitForSelector('[role=dialog] input[placeholder="https://example.com/mcp"]');
  await fill('[role=dialog] input[placeholder="https://example.com/mcp"]', o.mcp);
  await pause(300);
  await shot('add-server');
  await page.locator('[role=dialog] button ::-p-text(Add)').click();
  await page.waitForFunction((u) => document.body.innerText.includes(u) && !document.querySelector('[role=dialog]'), {}, o.mcp);
  log('server added');

  // The card's switch connects.
  const nav = page.waitForNavigation({ waitUntil: 'networkidle2' });
  await page.evaluate((name) => {
    const h = [...document.querySelectorAll('*')].find((e) => e.childElementCount === 0 && e.textContent.trim() === name);
    let c = h;
    while (c && !c.querySelector('input[type=checkbox],[role=switch]')) c = c.parentElement;
    c.querySelector('input[type=checkbox],[role=switch]').click();
  }, o.name);
  await nav;
  log(`at the identity provider: ${page.url().split('?')[0]}`);
  await page.waitForSelector('#login');
  await shot('idp-sign-in');
  await page.$eval('#login', (e) => { e.value = ''; });
  await page.type('#login', o.user);
  await Promise.all([page.waitForNavigation({ waitUntil: 'networkidle2' }), page.click('#sign-in')]);
  await page.waitForSelector('#allow');
  log(`consent page: ${(await page.$eval('#granted', (e) => e.innerText)).replace(/\n/g, '; ')}`);
  await shot('idp-consent');
  await Promise.all([page.waitForNavigation({ waitUntil: 'networkidle2' }), page.click('#allow')]);
  log(`back at ${page.url().split('?')[0]}`);

  await page.waitForFunction(() => document.body.innerText.includes('Authorization complete') || document.querySelector('[aria-label="Disconnect from server"]'), { timeout: 30_000 });
  await page.waitForSelector('[aria-label="Disconnect from server"]');
  await pause(1500);
  await shot('connected');
  log('connected');

  await page.locator('label ::-p-text(Tools)').click();
  await page.waitForFunction(() => /Tools \(\d+\)/.test(document.body.innerText));
  const tools = (await text()).match(/Tools \((\d+)\)/)[1];
  log(`tools listed: ${tools}`);
  await shot('tools');
  await page.locator('button ::-p-text(run_python)').click();
  const code = await inputByLabel('code');
  await page.waitForSelector(code);
  await fill(code, 'print(1+1)');
  await pause(300);
  await shot('run-python-form');
  await page.locator('button ::-p-text(Execute Tool)').click();
  await page.waitForFunction(() => document.body.innerText.includes('Structured Output'), { timeout: 60_000 });
  await pause(500);
  const result = await text();
  const verdict = /"verdict":\s*"(\w+)"/.exec(result)?.[1] ?? /verdict[^a-z]+(\w+)/.exec(result)?.[1];
  log(`run_python print(1+1): verdict ${verdict}, result ${result.includes('\n2\n') ? 'shows 2' : 'no 2 seen'}`);
  await shot('run-python-result');

  await page.locator('label ::-p-text(Servers)').click();
  await page.locator('button ::-p-text(Connection Info)').click();
  await page.waitForFunction(() => document.querySelector('[role=dialog]')?.innerText.includes('OAuth Details'));
  await pause(1000); // the modal fades in
  await page.evaluate(() => [...document.querySelectorAll('[role=dialog] *')].find((e) => e.childElementCount === 0 && e.textContent.trim() === 'OAuth Details')?.scrollIntoView());
  const info = await page.$eval('[role=dialog]', (e) => e.innerText);
  const oauth = info.slice(info.indexOf('OAuth Details')).split('\n').filter(Boolean);
  const fieldAfter = (k) => oauth[oauth.indexOf(k) + 1];
  log(`OAuth details: status ${fieldAfter('Status')}, registration ${fieldAfter('Client registration')}, scopes ${fieldAfter('Scopes')}`);
  // The access token, decoded (claims only, not the token).
  const jwt = oauth.find((l) => /^eyJ[\w-]+\.[\w-]+\.[\w-]+$/.test(l));
  if (jwt) {
    const c = JSON.parse(Buffer.from(jwt.split('.')[1], 'base64url'));
    log(`access token: iss ${c.iss}, aud ${c.aud}, sub ${c.sub}, email ${c.email}, scope "${c.scope}", lifetime ${c.exp - c.iat}s`);
  }
  // Hide the token before the screenshot.
  await page.evaluate(() => {
    for (const e of document.querySelectorAll('[role=dialog] *')) {
      if (e.childElementCount === 0 && /^eyJ/.test(e.textContent)) e.textContent = 'eyJ… (hidden in this screenshot)';
    }
  });
  await shot('connection-info');
  if (verdict !== 'ok') throw new Error(`run_python verdict ${verdict}`);
  const runs = metricValue(await srv.metrics(), 'pyjail_tenant_runs_total', { tenant: o.user });
  log(`pyjail_tenant_runs_total{tenant="${o.user}"} ${runs}`);
  if (runs !== 1) throw new Error(`the run was not counted as ${o.user}'s`);
  log(`done in ${((Date.now() - t0) / 1000).toFixed(1)}s`);
} catch (e) {
  await shot('failed').catch(() => {});
  console.error(`FAILED at ${page.url()}: ${e.message}`);
  console.error((await text().catch(() => '')).slice(0, 2000));
  console.error(consoleLines.filter((l) => l.startsWith('error')).slice(-20).join('\n'));
  process.exitCode = 1;
} finally {
  await ctx.close().catch(() => {});
  await browser.close();
  inspector.kill('SIGTERM');
  const how = await srv.stop();
  await as.close();
  if (how.leftJails.length) {
    console.error(`jails left: ${how.leftJails}`);
    process.exitCode = 1;
  }
  fs.rmSync(inspectorHome, { recursive: true, force: true });
}
