// End-to-end tests of sign-in (issue 25): `pyjail serve --http` as an
// OAuth 2.1 resource server in front of a real authorization server
// (oidc-provider, on loopback), with the official SDK client doing the
// authorization-code flow with PKCE and dynamic client registration.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { auth, UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';

import { describePids, makeEnv, show, sleep, text } from './harness.mjs';
import { freePort, metricValue, startHTTPServer } from './http_harness.mjs';
import { hmacWithPublicKey, INTROSPECTION_CLIENT, mint, signInAs, startAuthServer, unsigned } from './oidc_harness.mjs';

const users = {
  alice: { email: 'alice@example.com', rights: ['run', 'workspace'] },
  bob: { email: 'bob@example.com', rights: ['run', 'workspace'] },
  ops: { email: 'ops@example.com', rights: ['run', 'workspace', 'operator'] },
  dora: { email: 'dora@example.com', rights: ['run', 'workspace'] },
  olga: { email: 'olga@example.com', rights: ['run', 'workspace'] },
  rita: { email: 'rita@example.com', rights: ['run'] }, // may run code, not use a workspace
  carol: { email: 'carol@example.com', rights: ['run', 'workspace'] }, // known to the IdP, not to pyjail
};
const tenantMap = {
  'alice@example.com': 'alice', 'bob@example.com': 'bob', 'ops@example.com': 'ops',
  'dora@example.com': 'dora', 'olga@example.com': 'olga', 'rita@example.com': 'rita',
};

describe('sign-in with the organisation identity provider', { timeout: 240_000 }, () => {
  let as, srv, resource;
  before(async () => {
    const port = await freePort();
    resource = `http://127.0.0.1:${port}/mcp`;
    as = await startAuthServer({ users, resources: [resource, 'https://other.example.com/mcp'] });
    const secretDir = fs.mkdtempSync(path.join(process.env.TMPDIR ?? '/tmp', 'pyjail-e2e-secret-'));
    const secretFile = path.join(secretDir, 'introspection-secret');
    fs.writeFileSync(secretFile, as.secret, { mode: 0o600 });
    const env = makeEnv({
      auth: {
        resource,
        issuers: [{ issuer: as.issuer, introspection: { client_id: INTROSPECTION_CLIENT, client_secret_file: secretFile } }],
        tenants: { claim: 'email', map: tenantMap },
        clock_skew: '1s',
      },
    });
    srv = await startHTTPServer({ env, port, tenants: ['static-sam'] });
  });
  after(async () => {
    const how = await srv?.stop();
    await as?.close();
    if (how) assert.deepEqual(how.leftJails, [], `jails left:\n${describePids(how.leftJails)}`);
  });

  /**
   * Signs user in through the SDK client and returns a connected client.
   * With scope, the client asks for that scope up front (as a host
   * configured for operators would) instead of what the 401 names.
   */
  async function signIn(user, { scope, ...opts } = {}) {
    const provider = signInAs(user, opts);
    if (scope) {
      assert.equal(await auth(provider, { serverUrl: srv.url, scope }), 'REDIRECT');
      assert.equal(await auth(provider, { serverUrl: srv.url, scope, authorizationCode: provider.takeCode() }), 'AUTHORIZED');
    } else {
      const first = new StreamableHTTPClientTransport(srv.url, { authProvider: provider });
      const probe = new Client({ name: `e2e-${user}`, version: '1' });
      await assert.rejects(probe.connect(first), UnauthorizedError, 'the first request must be refused and start the flow');
      await first.finishAuth(provider.takeCode());
    }
    const transport = new StreamableHTTPClientTransport(srv.url, { authProvider: provider });
    const client = new Client({ name: `e2e-${user}`, version: '1' });
    await client.connect(transport);
    const c = {
      client, transport, provider,
      call: (name, a = {}) => client.callTool({ name, arguments: a }),
      readJSON: async (uri) => JSON.parse((await client.readResource({ uri })).contents[0].text),
      token: () => provider.tokens().access_token,
      close: () => client.close().catch(() => {}),
    };
    return c;
  }

  const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };
  const bearer = (t) => ({ Authorization: `Bearer ${t}` });
  const claimsFor = (extra = {}) => {
    const now = Math.floor(Date.now() / 1000);
    return { iss: as.issuer, aud: resource, sub: 'alice', email: 'alice@example.com', scope: 'pyjail:run pyjail:workspace', iat: now, exp: now + 300, ...extra };
  };

  test('Protected Resource Metadata at both well-known paths, and a 401 that points to it', async () => {
    const prmURL = new URL('/.well-known/oauth-protected-resource/mcp', srv.url);
    for (const u of [prmURL, new URL('/.well-known/oauth-protected-resource', srv.url)]) {
      const r = await fetch(u);
      assert.equal(r.status, 200, String(u));
      const m = await r.json();
      assert.equal(m.resource, resource);
      assert.deepEqual(m.authorization_servers, [as.issuer]);
      assert.deepEqual(m.scopes_supported, ['pyjail:run', 'pyjail:workspace', 'pyjail:operator']);
      assert.deepEqual(m.bearer_methods_supported, ['header']);
    }
    const none = await srv.post(init);
    assert.equal(none.status, 401);
    const ch = none.headers.get('www-authenticate');
    assert.match(ch, /^Bearer /);
    assert.ok(ch.includes(`resource_metadata="${prmURL}"`), ch);
    assert.ok(ch.includes('scope="pyjail:run pyjail:workspace"'), ch);
    assert.doesNotMatch(ch, /error=/, 'a request without a token gets no error code (RFC 6750 §3.1)');
  });

  test('a client in a browser page passes every preflight of the flow (the MCP Inspector 0.x in Direct mode)', async () => {
    // What the page's fetches ask before they are sent, in the flow's
    // order: the MCP POST (a 401 it must be able to read), the resource's
    // metadata, the authorization server's metadata, registration, token.
    const origin = 'http://127.0.0.1:6274';
    const preflight = async (url, method, headers) => {
      const r = await fetch(url, {
        method: 'OPTIONS',
        headers: { origin, 'access-control-request-method': method, 'access-control-request-headers': headers },
      });
      await r.arrayBuffer();
      assert.ok(r.status >= 200 && r.status < 300, `preflight of ${method} ${url}: ${r.status}`);
      const allowed = r.headers.get('access-control-allow-origin');
      assert.ok(allowed === origin || allowed === '*', `preflight of ${url}: Allow-Origin ${allowed}`);
      for (const h of headers.split(',')) {
        const list = (r.headers.get('access-control-allow-headers') ?? '').toLowerCase();
        assert.ok(list.includes(h) || list === '*', `preflight of ${url}: ${h} not in Allow-Headers ${list}`);
      }
    };
    const meta = await (await fetch(new URL('/.well-known/oauth-authorization-server', as.issuer))).json();
    await preflight(srv.url, 'POST', 'authorization,content-type,mcp-protocol-version,mcp-session-id');
    await preflight(new URL('/.well-known/oauth-protected-resource/mcp', srv.url), 'GET', 'mcp-protocol-version');
    await preflight(new URL('/.well-known/oauth-authorization-server', as.issuer), 'GET', 'mcp-protocol-version');
    await preflight(meta.registration_endpoint, 'POST', 'content-type');
    await preflight(meta.token_endpoint, 'POST', 'content-type');
    // The 401 itself: readable from the page, challenge included.
    const r = await fetch(srv.url, { method: 'POST', headers: { origin, 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: JSON.stringify(init) });
    await r.arrayBuffer();
    assert.equal(r.status, 401);
    assert.equal(r.headers.get('access-control-allow-origin'), origin);
    assert.match(r.headers.get('access-control-expose-headers') ?? '', /WWW-Authenticate/i);
  });

  test('the SDK signs in (authorization code, PKCE, dynamic registration) and calls every tool', async () => {
    const a = await signIn('alice');
    const [authURL] = a.provider.authorizationUrls;
    assert.equal(authURL.searchParams.get('code_challenge_method'), 'S256');
    assert.equal(authURL.searchParams.get('resource'), resource, 'the client names this server as the resource (RFC 8707)');
    assert.ok(a.provider.saved.client.client_id, 'registered dynamically');
    const payload = JSON.parse(Buffer.from(a.token().split('.')[1], 'base64url'));
    assert.equal(payload.aud, resource);
    assert.equal(payload.iss, as.issuer);

    const { tools } = await a.client.listTools();
    const calls = {
      run_python: { code: 'sum(range(10))' },
      run_sandbox_code: { code: "open('h.txt', 'w').write('hi')\nprint(open('h.txt').read())" },
      validate_json: { data: { a: 1 }, schema: { type: 'object' } },
      validate_csv: { csv: 'a,b\n1,2\n' },
      write_workspace_file: { path: 'secret.txt', content: 'alice only' },
      read_workspace_file: { path: 'secret.txt' },
      list_workspace_files: {},
      create_state_snapshot: { description: 'oauth' },
      list_state_snapshots: {},
      list_sessions: {},
    };
    const r0 = await a.call('run_python', { code: 'x = 41', session: 's1' });
    assert.notEqual(r0.isError, true, show(r0));
    calls.fork_session = { session: 's1', new_session: 's1-copy' };
    calls.close_session = { session: 's1' };
    for (const [name, args] of Object.entries(calls)) {
      const r = await a.call(name, args);
      assert.notEqual(r.isError, true, `${name}: ${show(r)}`);
    }
    const id = (await a.call('list_state_snapshots')).structuredContent.snapshots[0].id;
    for (const name of ['diff_state_snapshot', 'restore_state_snapshot', 'delete_state_snapshot']) {
      const r = await a.call(name, { snapshot_id: id });
      assert.notEqual(r.isError, true, `${name}: ${show(r)}`);
    }
    const called = new Set([...Object.keys(calls), 'diff_state_snapshot', 'restore_state_snapshot', 'delete_state_snapshot']);
    const missed = tools.map((t) => t.name).filter((n) => !called.has(n));
    assert.deepEqual(missed, [], 'every listed tool is called');
    const st = await a.readJSON('sandbox://status');
    assert.equal(st.tenant.name, 'alice');
    assert.equal(st.sign_in, undefined, 'the issuers are for operators');
    await a.close();
  });

  test('two users land in two tenants and cannot see each other', async () => {
    const a = await signIn('alice');
    const b = await signIn('bob');
    assert.notEqual((await a.call('write_workspace_file', { path: 'mine.txt', content: 'alice only' })).isError, true);
    const snap = (await a.call('create_state_snapshot', { description: 'alice' })).structuredContent;
    assert.equal((await b.readJSON('sandbox://status')).tenant.name, 'bob');
    const listed = (await b.call('list_workspace_files')).structuredContent.entries.map((e) => e.path);
    assert.ok(!listed.includes('mine.txt'), `bob lists ${listed}`);
    const read = await b.call('read_workspace_file', { path: 'mine.txt' });
    assert.equal(read.isError, true, show(read));
    const run = await b.call('run_sandbox_code', { code: "import os\nprint(sorted(os.listdir('.')))" });
    assert.doesNotMatch(text(run), /mine/);
    assert.equal((await b.call('restore_state_snapshot', { snapshot_id: snap.id })).isError, true);
    const logs = await b.readJSON('sandbox://logs');
    assert.ok(logs.traces.every((t) => !t.tenant || t.tenant === 'bob'));
    // A static token keeps working beside sign-in, in its own tenant.
    const sam = await srv.connect('static-sam');
    assert.equal((await sam.readJSON('sandbox://status')).tenant.name, 'static-sam');
    await Promise.all([a.close(), b.close()]);
  });

  test('bad tokens: each a 401 invalid_token naming what is wrong', async () => {
    const key = as.signingKey();
    const pub = { ...key, d: undefined };
    const stranger = await (await import('jose')).generateKeyPair('ES256', { extractable: true });
    const strangerJwk = { ...(await (await import('jose')).exportJWK(stranger.privateKey)), kid: 'es-unknown' };
    const cases = {
      'another audience': [await mint(key, claimsFor({ aud: 'https://other.example.com/mcp' })), /another resource/, 'audience'],
      expired: [await mint(key, claimsFor({ exp: Math.floor(Date.now() / 1000) - 60 })), /expired/, 'expired'],
      'an unknown key': [await mint(strangerJwk, claimsFor()), /key the issuer does not publish/, 'unknown_key'],
      'alg none': [unsigned(claimsFor(), key.kid), /algorithm 'none'/, 'algorithm'],
      'HS256 with the public key': [await hmacWithPublicKey(pub, claimsFor()), /algorithm 'HS256'/, 'algorithm'],
      'a wrong issuer': [await mint(key, claimsFor({ iss: 'http://127.0.0.1:1' })), /issuer is not one this server trusts/, 'issuer'],
    };
    const before = await srv.metrics();
    for (const [name, [tok, why, reason]] of Object.entries(cases)) {
      const r = await srv.post(init, bearer(tok));
      assert.equal(r.status, 401, `${name}: ${r.status} ${r.text}`);
      const ch = r.headers.get('www-authenticate');
      assert.match(ch, /error="invalid_token"/, name);
      assert.match(ch, why, `${name}: ${ch}`);
      assert.match(ch, /resource_metadata="/, name);
      const m = await srv.metrics();
      assert.ok(metricValue(m, 'pyjail_http_auth_refusals_total', { status: '401', reason }) >
        metricValue(before, 'pyjail_http_auth_refusals_total', { status: '401', reason }), `${name} not counted as ${reason}`);
      assert.ok(!m.includes(tok.slice(0, 20)) && !srv.stderr().includes(tok.slice(-20)), `${name}: the token leaked to metrics or logs`);
    }
    // The same key, the right claims: accepted (the cases differ in one thing each).
    assert.equal((await srv.post(init, bearer(await mint(key, claimsFor())))).status, 200);
  });

  test('a user the IdP knows but pyjail does not is refused with 403', async () => {
    await assert.rejects(signIn('carol'), /403|no tenant/);
    assert.ok(metricValue(await srv.metrics(), 'pyjail_http_auth_refusals_total', { status: '403', reason: 'unknown_user' }) >= 1);
  });

  test('a tool the token has no scope for is a 403 insufficient_scope naming the scopes to ask for', async () => {
    const r = await signIn('rita');
    const payload = JSON.parse(Buffer.from(r.token().split('.')[1], 'base64url'));
    assert.equal(payload.scope, 'pyjail:run', 'the authorization server granted run only');
    assert.equal((await r.call('run_python', { code: '2+2' })).structuredContent.value, '4');
    const list = { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'list_workspace_files', arguments: {} } };
    const raw = await srv.post(list, { ...bearer(r.token()), 'mcp-session-id': r.transport.sessionId, 'mcp-protocol-version': '2025-11-25' });
    assert.equal(raw.status, 403, raw.text);
    const ch = raw.headers.get('www-authenticate');
    assert.match(ch, /error="insufficient_scope"/);
    assert.ok(ch.includes('scope="pyjail:run pyjail:workspace"'), `the scope keeps what she has and adds what the tool needs: ${ch}`);
    assert.match(ch, /resource_metadata="/);
    // The SDK tries to step up (this SDK refreshes first, which keeps the
    // granted scope); the authorization server grants run only, so the
    // call stays refused, and the client is told so rather than looping.
    await assert.rejects(r.call('list_workspace_files'), /403|insufficient|Unauthorized/i);
    assert.ok(metricValue(await srv.metrics(), 'pyjail_http_auth_refusals_total', { status: '403', reason: 'insufficient_scope' }) >= 1);
    await r.close();
  });

  test('a key rotated at the server is picked up', async () => {
    const oldKid = as.kids()[0];
    const newKid = await as.rotate();
    // pyjail refetches a key set at most every 5 s (an unknown kid is one
    // bounded refetch): a rotation right after its last fetch waits that long.
    await sleep(5500);
    const d = await signIn('dora');
    const hdr = JSON.parse(Buffer.from(d.token().split('.')[0], 'base64url'));
    assert.equal(hdr.kid, newKid, 'the authorization server signs with its new key');
    const r = await d.call('run_python', { code: '6*7' });
    assert.equal(r.structuredContent.value, '42', show(r));
    const ops = await signIn('ops', { scope: 'pyjail:run pyjail:workspace pyjail:operator' });
    const st = await ops.readJSON('sandbox://status');
    assert.equal(st.tenant.operator, true);
    const iss = st.sign_in.issuers[0];
    assert.equal(iss.issuer, as.issuer);
    assert.ok(iss.key_ids.includes(newKid) && iss.key_ids.includes(oldKid), JSON.stringify(iss));
    assert.doesNotMatch(JSON.stringify(st), /"d":|BEGIN|eyJ/, 'no key material and no token in status');
    await Promise.all([d.close(), ops.close()]);
  });

  test('a removed user is refused once the token expires, and at once with introspection', async () => {
    // JWT, short-lived: valid until exp, then refused; refresh is refused
    // by the authorization server, which no longer knows the user.
    const o = await signIn('olga', { clientName: 'pyjail-e2e short' });
    const jwt = o.token();
    const { exp } = JSON.parse(Buffer.from(jwt.split('.')[1], 'base64url'));
    assert.ok(exp - Date.now() / 1000 < 30, `a short-lived token (exp in ${exp - Date.now() / 1000} s)`);
    await as.noteGrant('olga', o.provider.tokens());
    await as.removeUser('olga');
    if (Date.now() / 1000 < exp - 1) {
      assert.equal((await srv.post(init, bearer(jwt))).status, 200, 'a JWT is good until it expires');
    }
    while (Date.now() / 1000 < exp + 2) await sleep(250);
    const late = await srv.post(init, bearer(jwt));
    assert.equal(late.status, 401);
    assert.match(late.headers.get('www-authenticate'), /error="invalid_token".*expired/);
    await assert.rejects(o.call('run_python', { code: '1' }), /invalid_grant|Unauthorized|401|authorization refused/i);

    // Opaque and introspected: refused at the next request.
    const b = await signIn('bob', { clientName: 'pyjail-e2e opaque' });
    const opaque = b.token();
    assert.equal(opaque.split('.').length, 1, 'an opaque token');
    assert.notEqual((await b.call('run_python', { code: '1+1' })).isError, true);
    await as.noteGrant('bob', b.provider.tokens());
    await as.removeUser('bob');
    const gone = await srv.post(init, bearer(opaque));
    assert.equal(gone.status, 401, gone.text);
    assert.match(gone.headers.get('www-authenticate'), /not active/);
    assert.ok(metricValue(await srv.metrics(), 'pyjail_http_auth_refusals_total', { status: '401', reason: 'inactive' }) >= 1);
    await Promise.all([o.close(), b.close()]);
  });
});
