// A real authorization server for the sign-in tests: the OpenID-certified
// `oidc-provider` on loopback, on an ephemeral port, in this process. It
// issues JWT access tokens (RFC 9068) bound to the requested resource
// (RFC 8707), opaque ones to clients whose name says so, registers clients
// dynamically (RFC 7591, what the SDK client falls back to), requires PKCE,
// and introspects (RFC 7662) for pyjail's own client.
//
// Sign-in needs no browser: the test's "user agent" follows the redirects
// with a cookie jar, and the interaction route logs in the user named by
// the authorization request's login_hint and consents to what that user
// may have. Users can be removed (their grants go with them), and the
// signing keys rotated, while the server runs.

import crypto from 'node:crypto';
import http from 'node:http';

import * as jose from 'jose';
import Provider, { errors } from 'oidc-provider';

import { freePort } from './http_harness.mjs';

/** The client pyjail introspects with, and its secret. */
export const INTROSPECTION_CLIENT = 'pyjail-introspection';

async function newKey() {
  const { privateKey } = await jose.generateKeyPair('ES256', { extractable: true });
  const jwk = await jose.exportJWK(privateKey);
  return { ...jwk, kid: `es-${crypto.randomBytes(4).toString('hex')}`, alg: 'ES256', use: 'sig' };
}

/**
 * Starts the authorization server. users maps a login name to
 * {email, rights: ['run', 'workspace', 'operator']}; resources are the
 * resource indicators it issues tokens for (anything else is refused);
 * defaultUser signs in when the request names nobody (login_hint).
 * With forms, sign-in and consent are pages a person (or a browser driven
 * by a script) fills in instead, defaultUser prefilled.
 */
export async function startAuthServer({ users, resources, shortTTL = 6, ttl = 600, defaultUser, port, forms = false }) {
  port ??= await freePort();
  const issuer = `http://127.0.0.1:${port}`;
  const secret = crypto.randomBytes(24).toString('base64url');
  const accounts = new Map(Object.entries(users));
  const grantsOf = new Map();
  let keys = [await newKey()];

  const scopeOf = (rights) => rights.map((r) => `pyjail:${r}`);
  function config() {
    return {
      clients: [{
        client_id: INTROSPECTION_CLIENT, client_secret: secret,
        grant_types: [], redirect_uris: [], response_types: [], token_endpoint_auth_method: 'client_secret_basic',
      }],
      jwks: { keys },
      cookies: { keys: ['pyjail-e2e-cookie-key'] },
      // Only ES256 keys: clients' ID tokens are signed with it too.
      clientDefaults: { id_token_signed_response_alg: 'ES256', grant_types: ['authorization_code', 'refresh_token'] },
      // The resource's scopes too: dynamic registration checks a client's
      // scope against this list.
      scopes: ['openid', 'offline_access', 'pyjail:run', 'pyjail:workspace', 'pyjail:operator'],
      claims: { openid: ['sub'], email: ['email'] },
      async findAccount(_ctx, id) {
        const u = accounts.get(id);
        if (!u) return undefined;
        return { accountId: id, claims: async () => ({ sub: id, email: u.email }) };
      },
      // The tenant claim travels in the access token.
      async extraTokenClaims(_ctx, token) {
        const u = accounts.get(token.accountId);
        return u ? { email: u.email } : undefined;
      },
      interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
      features: {
        devInteractions: { enabled: false },
        registration: { enabled: true },
        introspection: { enabled: true },
        revocation: { enabled: true },
        resourceIndicators: {
          enabled: true,
          useGrantedResource: async () => true,
          async getResourceServerInfo(_ctx, indicator, client) {
            if (!resources.includes(indicator)) throw new errors.InvalidTarget(`unknown resource ${indicator}`);
            const name = client.clientName ?? '';
            return {
              scope: 'pyjail:run pyjail:workspace pyjail:operator',
              audience: indicator,
              accessTokenTTL: name.includes('short') ? shortTTL : ttl,
              accessTokenFormat: name.includes('opaque') ? 'opaque' : 'jwt',
              jwt: { sign: { alg: 'ES256' } },
            };
          },
        },
      },
      issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
      pkce: { required: () => true },
      // A number here would override the resource server's accessTokenTTL.
      ttl: { AccessToken: (_ctx, token) => token.resourceServer?.accessTokenTTL ?? ttl, Grant: 3600, Session: 3600, Interaction: 600, RefreshToken: 3600 },
    };
  }
  let provider = new Provider(issuer, config());

  // Consent: what was asked for, narrowed to what the user may have.
  async function grantFor(details) {
    const { prompt, params } = details;
    const accountId = details.session.accountId;
    const allowed = scopeOf(accounts.get(accountId)?.rights ?? []);
    const grant = details.grantId ? await provider.Grant.find(details.grantId) : new provider.Grant({ accountId, clientId: params.client_id });
    const missing = prompt.details;
    const split = (scopes) => [scopes.filter((x) => !x.startsWith('pyjail:') || allowed.includes(x)), scopes.filter((x) => x.startsWith('pyjail:') && !allowed.includes(x))];
    const granted = [];
    const refused = [];
    if (missing.missingOIDCScope) {
      const [yes, no] = split(missing.missingOIDCScope);
      if (yes.length) grant.addOIDCScope(yes.join(' '));
      if (no.length) grant.rejectOIDCScope(no.join(' '));
      // Resource scopes are listed with their resource below.
      granted.push(...yes.filter((x) => !x.startsWith('pyjail:')));
      refused.push(...no.filter((x) => !x.startsWith('pyjail:')));
    }
    for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes ?? {})) {
      const [yes, no] = split(scopes);
      if (yes.length) grant.addResourceScope(indicator, yes.join(' '));
      if (no.length) grant.rejectResourceScope(indicator, no.join(' '));
      granted.push(...yes.map((x) => `${x} at ${indicator}`));
      refused.push(...no.map((x) => `${x} at ${indicator}`));
    }
    return { grant, granted, refused };
  }

  async function interaction(req, res) {
    const details = await provider.interactionDetails(req, res);
    const { prompt, params } = details;
    if (forms) return interactionPage(req, res, details);
    if (prompt.name === 'login') {
      // A browser driven by hand sends no login_hint: defaultUser then.
      const name = params.login_hint ?? defaultUser;
      if (!accounts.has(name)) {
        return provider.interactionFinished(req, res, { error: 'access_denied', error_description: `no user ${name}` }, { mergeWithLastSubmission: false });
      }
      return provider.interactionFinished(req, res, { login: { accountId: name } }, { mergeWithLastSubmission: false });
    }
    const { grant } = await grantFor(details);
    const grantId = await grant.save();
    return provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
  }

  // With forms, a person signs in and consents on two pages, as at a
  // real identity provider: GET shows the page, POST …/login, …/consent
  // or …/abort answers it.
  async function interactionPage(req, res, details) {
    const { uid, prompt, params } = details;
    const page = (title, body) => {
      res.setHeader('Content-Type', 'text/html; charset=utf-8');
      res.setHeader('Cache-Control', 'no-store');
      res.end(`<!doctype html><html><head><meta charset="utf-8"><title>${esc(title)}</title>
<style>body{font-family:sans-serif;max-width:34em;margin:3em auto}input,button{font-size:1em;padding:.3em}li{margin:.2em 0}</style>
</head><body><h1>${esc(title)}</h1>${body}</body></html>`);
    };
    const action = req.url.split('?')[0].split('/')[3];
    if (req.method === 'POST') {
      const form = new URLSearchParams(await readBody(req));
      if (action === 'abort') {
        return provider.interactionFinished(req, res, { error: 'access_denied', error_description: 'the user said no' }, { mergeWithLastSubmission: false });
      }
      if (action === 'login' && prompt.name === 'login') {
        const name = form.get('login') ?? '';
        if (!accounts.has(name)) {
          res.statusCode = 403;
          return page('Sign in', `<p id="error">No user <b>${esc(name)}</b> here. <a href="/interaction/${esc(uid)}">Try again</a>.</p>`);
        }
        return provider.interactionFinished(req, res, { login: { accountId: name } }, { mergeWithLastSubmission: false });
      }
      if (action === 'consent' && prompt.name === 'consent') {
        const { grant } = await grantFor(details);
        const grantId = await grant.save();
        return provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
      }
      res.statusCode = 400;
      return page('Sign in', '<p>That form does not belong to this step.</p>');
    }
    const client = await provider.Client.find(params.client_id);
    const clientName = client?.clientName ?? params.client_id;
    const abort = `<form method="post" action="/interaction/${esc(uid)}/abort" style="display:inline"><button id="deny">Deny</button></form>`;
    if (prompt.name === 'login') {
      return page('Sign in', `<p><b>${esc(clientName)}</b> asks you to sign in.</p>
<form method="post" action="/interaction/${esc(uid)}/login">
<label>User name <input id="login" name="login" autofocus value="${esc(params.login_hint ?? defaultUser ?? '')}"></label>
<button id="sign-in">Sign in</button></form>
<p>Users here: ${[...accounts.keys()].map(esc).join(', ')}.</p>${abort}`);
    }
    const { granted, refused } = await grantFor(details);
    return page('Allow access?', `<p>Signed in as <b>${esc(details.session.accountId)}</b>.
<b>${esc(clientName)}</b> asks for:</p><ul id="granted">${granted.map((x) => `<li>${esc(x)}</li>`).join('') || '<li>nothing new</li>'}</ul>
${refused.length ? `<p>Not yours to give (left out):</p><ul id="refused">${refused.map((x) => `<li>${esc(x)}</li>`).join('')}</ul>` : ''}
<form method="post" action="/interaction/${esc(uid)}/consent" style="display:inline"><button id="allow">Allow</button></form> ${abort}`);
  }

  const server = http.createServer((req, res) => {
    // oidc-provider answers CORS on discovery, JWKS and the token endpoint
    // but not on dynamic registration, which a client running in a page
    // (the MCP Inspector 0.x in "Direct" mode) calls from the browser.
    if (req.url === '/reg' && req.headers.origin) {
      res.setHeader('Access-Control-Allow-Origin', req.headers.origin);
      res.setHeader('Vary', 'Origin');
      if (req.method === 'OPTIONS') {
        res.setHeader('Access-Control-Allow-Methods', 'POST');
        res.setHeader('Access-Control-Allow-Headers', 'content-type, authorization, mcp-protocol-version');
        res.statusCode = 204;
        res.end();
        return;
      }
    }
    if (req.url.startsWith('/interaction/')) {
      interaction(req, res).catch((e) => {
        res.statusCode = 500;
        res.end(String(e));
      });
      return;
    }
    provider.callback()(req, res);
  });
  await new Promise((resolve) => server.listen(port, '127.0.0.1', resolve));

  return {
    issuer, port, secret,
    kids: () => keys.map((k) => k.kid),
    /** The current signing key (private JWK), for minting bad tokens. */
    signingKey: () => keys[0],
    /** A new signing key first, the old one still published. */
    async rotate() {
      keys = [await newKey(), ...keys];
      provider = new Provider(issuer, config());
      return keys[0].kid;
    },
    /** Removes a user and revokes everything issued to them. */
    async removeUser(name) {
      accounts.delete(name);
      for (const id of grantsOf.get(name) ?? []) {
        const g = await provider.Grant.find(id);
        await g?.destroy();
      }
    },
    /** Records the grants of a user, so removeUser can revoke them. */
    async noteGrant(name, { access_token: at, refresh_token: rt }) {
      const find = (Model, v) => (v ? Model.find(v).catch(() => undefined) : undefined);
      const t = (await find(provider.AccessToken, at)) ?? (await find(provider.RefreshToken, rt));
      if (t?.grantId) grantsOf.set(name, [...(grantsOf.get(name) ?? []), t.grantId]);
    },
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(resolve); }),
  };
}

/**
 * An OAuthClientProvider for the SDK client that signs `user` in: it
 * registers dynamically, and its redirectToAuthorization plays the
 * browser (cookie jar, manual redirects) up to the code at redirect_uri.
 */
export function signInAs(user, { clientName = `pyjail-e2e ${user}`, loginHint = user } = {}) {
  const redirectUrl = 'http://127.0.0.1:1/callback';
  const state = {};
  const p = {
    get redirectUrl() { return redirectUrl; },
    get clientMetadata() {
      return {
        client_name: clientName, redirect_uris: [redirectUrl],
        grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none',
      };
    },
    clientInformation: () => state.client,
    saveClientInformation: (c) => { state.client = c; },
    tokens: () => state.tokens,
    saveTokens: (t) => { state.tokens = t; },
    saveCodeVerifier: (v) => { state.verifier = v; },
    codeVerifier: () => state.verifier,
    discoveryState: () => state.discovery,
    saveDiscoveryState: (d) => { state.discovery = d; },
    invalidateCredentials: (what) => {
      if (what === 'all' || what === 'tokens') state.tokens = undefined;
      if (what === 'all' || what === 'client') state.client = undefined;
    },
    authorizationUrls: [],
    async redirectToAuthorization(url) {
      url.searchParams.set('login_hint', loginHint);
      p.authorizationUrls.push(new URL(url));
      state.code = await followToCode(url, redirectUrl);
    },
    /** The code the last authorization returned, once. */
    takeCode() {
      const c = state.code;
      state.code = undefined;
      return c;
    },
    saved: state,
  };
  return p;
}

/** Follows redirects like a browser with cookies until redirect_uri. */
async function followToCode(start, redirectUrl) {
  const jar = new Map();
  let url = new URL(start);
  for (let hop = 0; hop < 20; hop++) {
    const cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
    const r = await fetch(url, { redirect: 'manual', headers: cookie ? { cookie } : {} });
    for (const c of r.headers.getSetCookie()) {
      const [kv] = c.split(';');
      const i = kv.indexOf('=');
      jar.set(kv.slice(0, i), kv.slice(i + 1));
    }
    const loc = r.headers.get('location');
    await r.arrayBuffer();
    if (!loc) throw new Error(`sign-in stopped at ${url} with HTTP ${r.status}`);
    url = new URL(loc, url);
    if (url.href.startsWith(redirectUrl)) {
      const err = url.searchParams.get('error');
      if (err) throw new Error(`authorization refused: ${err}: ${url.searchParams.get('error_description')}`);
      return url.searchParams.get('code');
    }
  }
  throw new Error('too many redirects signing in');
}

function esc(v) {
  return String(v).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** Reads a small request body (a form). */
function readBody(req) {
  return new Promise((resolve, reject) => {
    let size = 0;
    const parts = [];
    req.on('data', (d) => {
      size += d.length;
      if (size > 16384) {
        reject(new Error('form too large'));
        req.destroy();
        return;
      }
      parts.push(d);
    });
    req.on('end', () => resolve(Buffer.concat(parts).toString()));
    req.on('error', reject);
  });
}

/** Signs a token with key (a private JWK) over claims, as any issuer. */
export async function mint(key, claims, { alg = 'ES256', kid = key.kid, typ = 'at+jwt' } = {}) {
  const k = await jose.importJWK(key, alg);
  return new jose.SignJWT(claims).setProtectedHeader({ alg, kid, typ }).sign(k);
}

/** An unsigned token (alg none), by hand: no library signs those. */
export function unsigned(claims, kid) {
  const b64 = (v) => Buffer.from(JSON.stringify(v)).toString('base64url');
  return `${b64({ alg: 'none', typ: 'at+jwt', kid })}.${b64(claims)}.`;
}

/** HS256 keyed with the issuer's public key, as its JWKS publishes it. */
export async function hmacWithPublicKey(publicJwk, claims) {
  const pub = await jose.importJWK({ ...publicJwk, d: undefined }, 'ES256');
  const spki = await jose.exportSPKI(pub);
  return new jose.SignJWT(claims).setProtectedHeader({ alg: 'HS256', kid: publicJwk.kid, typ: 'at+jwt' })
    .sign(new TextEncoder().encode(spki));
}
