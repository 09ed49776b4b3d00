// Runs by hand: an authorization server (oidc-provider, as in
// oauth.test.mjs) and `pyjail serve --http` signed in through it, for
// trying a host that takes a URL (the MCP Inspector's OAuth flow). Not
// part of `make e2e`. Needs root, like the server.
//
//   node signin_demo.mjs [--user alice] [--seconds 600] [--port N] [--issuer-port M] [--auto]
//
// It prints the URL to give the host. Sign-in shows two pages, as a real
// identity provider does: a user name (alice or ops; --user is prefilled)
// and the consent to the scopes that user may have. With --auto there are
// no pages and every sign-in logs in --user at once. The ports are free
// ones unless --port (pyjail) and --issuer-port (the authorization
// server) name them.

import { parseArgs } from 'node:util';
import fs from 'node:fs';
import path from 'node:path';

import { makeEnv } from './harness.mjs';
import { freePort, startHTTPServer } from './http_harness.mjs';
import { INTROSPECTION_CLIENT, startAuthServer } from './oidc_harness.mjs';

const { values } = parseArgs({
  options: {
    user: { type: 'string', default: 'alice' }, seconds: { type: 'string', default: '600' },
    port: { type: 'string' }, 'issuer-port': { type: 'string' }, auto: { type: 'boolean', default: false },
  },
});
const port = values.port ? Number(values.port) : await freePort();
const resource = `http://127.0.0.1:${port}/mcp`;
const users = {
  alice: { email: 'alice@example.com', rights: ['run', 'workspace'] },
  ops: { email: 'ops@example.com', rights: ['run', 'workspace', 'operator'] },
};
const as = await startAuthServer({
  users, resources: [resource], defaultUser: values.user, forms: !values.auto,
  port: values['issuer-port'] ? Number(values['issuer-port']) : undefined,
});
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
console.log(`authorization server: ${as.issuer}`);
console.log(`pyjail:               ${resource}   (${values.auto ? `signs in as ${values.user}` : 'sign-in pages: alice or ops'})`);
console.log(`metrics:              ${srv.metricsURL}/metrics`);
const stop = async () => {
  await srv.stop();
  await as.close();
  process.exit(0);
};
process.on('SIGINT', stop);
process.on('SIGTERM', stop);
setTimeout(stop, Number(values.seconds) * 1000);
