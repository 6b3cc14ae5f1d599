// The stand-in for Microsoft's and Google's sign-in in mailgate's delegated OAuth tests (issue 37,
// item 5): npm oidc-provider (OpenID Certified; nobody on this project wrote it) on loopback, with
// the device authorization grant (RFC 8628), the authorization code grant with PKCE S256 and
// loopback redirects for a native app (RFC 8252), refresh-token rotation, revocation (RFC 7009),
// introspection (RFC 7662; Dovecot's oauth2 passdb asks it whether an XOAUTH2/OAUTHBEARER token is
// live), and ID tokens carrying email, email_verified and preferred_username.
//
// Usage: node oauth-delegated-provider.mjs [PORT] [--access-ttl=SECONDS] [--exit-on-stdin-eof]
//   PORT                 0 (default) = any free port. Dovecot's config names one fixed port
//                        (MT_OAUTH_PORT of scripts/mailserver.sh), so the tests start it there.
//   --access-ttl=S       access token lifetime (default 60, or env OAUTH_ACCESS_TTL): short, so a
//                        refresh before expiry is testable without long waits.
//   --introspection-secret=S  the secret of the confidential client `dovecot` (default, or env
//                        OAUTH_INTROSPECTION_SECRET; must match scripts/mailserver.sh).
//   --exit-on-stdin-eof  exit when stdin closes: the test harness keeps a pipe open, so the
//                        provider ends with the test process even when that one is killed -9.
// Prints `issuer <URL>` once it listens, then serves until killed.
//
// Accounts (all fictional): ada@example.com, eve@example.org (both verified), unverified@example.org
// (email_verified false), and any `t-<lowercase letters, digits, dashes>@example.org|example.com`,
// so each test can sign in as an account of its own and read its own counters. The `sub` is
// opaque (derived from the address), as at real providers: who signed in is the email claim.
//
// Test-only routes (never part of a real provider; they replace the operator's browser):
//   POST /test/approve    form: user_code, account[, deny=1]  -> finishes a device authorization
//                         as `account` (or refuses it: the poll then gets access_denied) through
//                         the provider's own pages and interaction API. 200 {"approved": bool}.
//   GET  /test/authorize?<authorization request>&account=A -> signs in as A through /auth and the
//                         interaction API; 303 to the provider's final Location (the client's
//                         loopback redirect_uri with code, state and iss, or with error=...).
//   POST /test/revoke-all form: account -> revokes every grant of the account and its tokens,
//                         as a user removing the app's access would. 200 {"revoked": <grants>}.
//   POST /test/ttl        form: account, access_ttl -> that account's later access tokens live
//                         access_ttl seconds (0 = back to the default). 200 {"account", "access_ttl"}.
//   POST /test/hold       form: account, on=1|0 -> while on, the account's refresh requests at the
//                         token endpoint are held before the provider sees them: released to it
//                         when the hold is turned off, dropped unseen (nothing rotated) when their
//                         client goes away first, as a client killed mid-refresh does.
//                         200 {"held": n}. Other accounts' requests pass.
//   GET  /test/held?account=A -> {"held": n, "dropped": n}: the account's requests held now, and
//                         those dropped unseen.
//   GET  /test/tokens?account=A -> {"tokens": [...]}: every access token, refresh token and device
//                         code issued to the account, so a test can prove none of them was logged.
//   GET  /test/stats[?account=A] -> {"provider": "mailgate-oauth-delegated", "protocol": 1,
//                         "accounts": {A: {"token": {<grant_type>: {"ok": n, "error": n}},
//                         "introspection": {"active": n, "inactive": n, "error": n},
//                         "revocation": n}}}. A device-code poll before approval counts under "-"
//                         (the code names no account until then).
import crypto from 'node:crypto';
import http from 'node:http';

import { exportJWK, generateKeyPair } from 'jose';
import Provider from 'oidc-provider';

const PROTOCOL = 1;
const CLIENT_ID = 'mailgate-delegated';
const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const hit = args.find((a) => a.startsWith(`--${name}=`));
  return hit ? hit.slice(name.length + 3) : fallback;
};
const port = Number(args.find((a) => /^\d+$/.test(a)) ?? 0);
const accessTtl = Number(option('access-ttl', process.env.OAUTH_ACCESS_TTL ?? 60));
const introspectionSecret = option(
  'introspection-secret',
  process.env.OAUTH_INTROSPECTION_SECRET ?? 'dovecot-introspection-test-only',
);
if (!Number.isInteger(accessTtl) || accessTtl < 1) throw new Error('--access-ttl must be >= 1');

// --- accounts ---------------------------------------------------------------------------------
const FIXED = new Map([
  ['ada@example.com', { name: 'Ada Example', verified: true }],
  ['eve@example.org', { name: 'Eve Example', verified: true }],
  ['unverified@example.org', { name: 'Unverified Example', verified: false }],
]);
const FRESH = /^t-[a-z0-9-]{1,100}@example\.(org|com)$/;
const subOf = (email) => `u-${crypto.createHash('sha256').update(email).digest('hex').slice(0, 24)}`;
const emailBySub = new Map();
function known(email) {
  if (typeof email !== 'string') return undefined;
  const address = email.trim().toLowerCase();
  const fixed = FIXED.get(address);
  const profile = fixed ?? (FRESH.test(address) ? { name: address.split('@')[0], verified: true } : undefined);
  if (!profile) return undefined;
  emailBySub.set(subOf(address), address);
  return { email: address, sub: subOf(address), ...profile };
}
for (const email of FIXED.keys()) known(email);

async function findAccount(_ctx, sub) {
  const email = emailBySub.get(sub);
  if (!email) return undefined;
  const { name, verified } = known(email);
  return {
    accountId: sub,
    async claims() {
      return { sub, email, email_verified: verified, preferred_username: email, name };
    },
  };
}

// --- counters a test reads (per account, so concurrent tests never see each other's) ----------
const stats = new Map();
const statsOf = (email) => {
  const key = email ?? '-';
  if (!stats.has(key)) stats.set(key, { token: {}, introspection: { active: 0, inactive: 0, error: 0 }, revocation: 0 });
  return stats.get(key);
};
// Token values -> account, from the models' save events: a refresh that fails (a revoked or
// rotated-away token) has no account in the provider's context, yet the test counts it.
const accountByToken = new Map();
const grantsByAccount = new Map();
const ttlByAccount = new Map();

// --- the provider -----------------------------------------------------------------------------
const { privateKey } = await generateKeyPair('ES256', { extractable: true });
const jwk = { ...(await exportJWK(privateKey)), kid: 'delegated-1', alg: 'ES256', use: 'sig' };

const server = http.createServer();
await new Promise((done, fail) => {
  server.once('error', fail);
  server.listen(port, '127.0.0.1', done);
});
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  clients: [
    {
      // mailgate as a native app (RFC 8252): public, PKCE, loopback redirects on any port.
      client_id: CLIENT_ID,
      application_type: 'native',
      token_endpoint_auth_method: 'none',
      grant_types: [DEVICE_GRANT, 'authorization_code', 'refresh_token'],
      response_types: ['code'],
      redirect_uris: ['http://127.0.0.1/', 'http://127.0.0.1/callback'],
      id_token_signed_response_alg: 'ES256',
      scope: 'openid email profile offline_access mail.read mail.send',
    },
    {
      // Dovecot's oauth2 passdb introspects with HTTP basic auth; the default policy lets a
      // confidential client introspect another client's tokens.
      client_id: 'dovecot',
      client_secret: introspectionSecret,
      grant_types: [],
      response_types: [],
      redirect_uris: [],
      token_endpoint_auth_method: 'client_secret_basic',
      // The only signing key is ES256; the RS256 default would make the client invalid.
      id_token_signed_response_alg: 'ES256',
    },
  ],
  jwks: { keys: [jwk] },
  findAccount,
  scopes: ['openid', 'email', 'profile', 'offline_access', 'mail.read', 'mail.send'],
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['preferred_username', 'name'],
  },
  // Without this the ID token carries only `sub` whenever userinfo exists (the claims would go to
  // /me only); Microsoft's and Google's ID tokens carry the email, and mailgate binds on it.
  conformIdTokenClaims: false,
  pkce: { required: () => true },
  rotateRefreshToken: true,
  // Dovecot reads the user from the introspection answer (username_attribute = email).
  async extraTokenClaims(_ctx, token) {
    const email = emailBySub.get(token.accountId);
    return token.kind === 'AccessToken' && email ? { email, username: email } : undefined;
  },
  interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
  cookies: { keys: [crypto.randomBytes(32).toString('base64url')] },
  features: {
    devInteractions: { enabled: false },
    deviceFlow: { enabled: true },
    revocation: { enabled: true },
    introspection: { enabled: true },
  },
  ttl: {
    AccessToken: (_ctx, token) => ttlByAccount.get(emailBySub.get(token.accountId)) || accessTtl,
    AuthorizationCode: 60,
    DeviceCode: 600,
    IdToken: 3600,
    Interaction: 600,
    Session: 3600,
    Grant: 14 * 24 * 3600,
    RefreshToken: 14 * 24 * 3600,
  },
});

provider.on('grant.saved', (grant) => {
  const email = emailBySub.get(grant.accountId);
  if (!email) return;
  if (!grantsByAccount.has(email)) grantsByAccount.set(email, new Set());
  grantsByAccount.get(email).add(grant.jti);
});
for (const kind of ['access_token', 'refresh_token']) {
  provider.on(`${kind}.saved`, (token) => {
    const email = emailBySub.get(token.accountId);
    if (email) accountByToken.set(token.jti, email);
  });
}

// Counts each token, introspection and revocation call by account once the provider answered.
provider.use(async (ctx, next) => {
  let failed = false;
  try {
    await next();
  } catch (e) {
    failed = true;
    throw e;
  } finally {
    const route = ctx.oidc?.route;
    const params = ctx.oidc?.params ?? {};
    if (route === 'token') {
      const email = emailBySub.get(ctx.oidc.entities?.Account?.accountId)
        ?? accountByToken.get(params.refresh_token)
        ?? accountByToken.get(params.device_code);
      const byType = statsOf(email).token;
      const type = params.grant_type ?? '-';
      byType[type] ??= { ok: 0, error: 0 };
      byType[type][!failed && ctx.status === 200 ? 'ok' : 'error'] += 1;
    } else if (route === 'introspection') {
      // error: the caller was refused (Dovecot's client secret wrong), no answer about the token
      const answer = failed || ctx.status !== 200 ? 'error' : ctx.body?.active === true ? 'active' : 'inactive';
      statsOf(accountByToken.get(params.token)).introspection[answer] += 1;
    } else if (route === 'revocation') {
      statsOf(accountByToken.get(params.token)).revocation += 1;
    }
  }
});

// --- the interaction pages: what a person does in the browser ----------------------------------
const html = (s) => String(s).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

// A login form for a person trying the provider by hand; the test routes post it directly.
async function interactionPage(req, res, uid) {
  const details = await provider.interactionDetails(req, res);
  res.setHeader('Content-Type', 'text/html; charset=utf-8');
  res.end(`<!doctype html><title>Sign in</title><form method="post" action="/interaction/${html(uid)}">
<p>${html(details.prompt.name)} for ${html(details.params.client_id)} (${html(details.params.scope ?? '')})</p>
<input name="account" placeholder="ada@example.com" value="${html(details.params.login_hint ?? '')}">
<button>Continue</button></form>`);
}

// Finishes the current prompt: login as the posted account, or consent to everything asked.
async function interactionSubmit(req, res, form) {
  const details = await provider.interactionDetails(req, res);
  if (details.prompt.name === 'login') {
    const account = known(form.get('account'));
    if (!account) {
      await provider.interactionFinished(req, res, {
        error: 'access_denied', error_description: 'unknown test account',
      }, { mergeWithLastSubmission: false });
      return;
    }
    await provider.interactionFinished(req, res, { login: { accountId: account.sub } }, {
      mergeWithLastSubmission: false,
    });
    return;
  }
  const { prompt: { details: missing }, params, session, grantId } = details;
  const grant = grantId
    ? await provider.Grant.find(grantId)
    : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
  if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
  if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
  for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes ?? {})) {
    grant.addResourceScope(indicator, scopes.join(' '));
  }
  const saved = await grant.save();
  await provider.interactionFinished(req, res, { consent: grantId ? {} : { grantId: saved } }, {
    mergeWithLastSubmission: true,
  });
}

// --- a scripted browser for the test routes ----------------------------------------------------
// Drives the provider's own pages over HTTP with a cookie jar, so the session, xsrf and
// interaction cookies, PKCE and redirect checks all run as they do for a person.
class Browser {
  jar = new Map();

  async go(url, { method = 'GET', form } = {}) {
    const res = await fetch(new URL(url, issuer), {
      method,
      redirect: 'manual',
      headers: {
        cookie: [...this.jar].map(([k, v]) => `${k}=${v}`).join('; '),
        ...(form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
      },
      body: form ? new URLSearchParams(form).toString() : undefined,
    });
    for (const line of res.headers.getSetCookie()) {
      const [pair, ...attrs] = line.split(';');
      const eq = pair.indexOf('=');
      const name = pair.slice(0, eq).trim();
      const value = pair.slice(eq + 1).trim();
      const gone = !value || attrs.some((a) => /^\s*(max-age=0|expires=thu, 01 jan 1970)/i.test(a));
      if (gone) this.jar.delete(name); else this.jar.set(name, value);
    }
    return res;
  }

  // Follows the provider's redirects, answering each interaction as `account`; returns the
  // last answer: a Location off the provider (the client's redirect) or a page.
  async follow(res, account) {
    for (let hops = 0; hops < 20; hops += 1) {
      const location = res.headers.get('location');
      if (res.status < 300 || res.status >= 400 || !location) return { res };
      const next = new URL(location, issuer);
      if (next.origin !== issuer) return { res, location: next.href };
      if (/^\/interaction\/[^/]+$/.test(next.pathname)) {
        res = await this.go(next, { method: 'POST', form: { account } });
      } else {
        res = await this.go(next);
      }
    }
    throw new Error('too many redirects');
  }
}

const hiddenInputs = (page) => Object.fromEntries(
  [...page.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)"/g)].map((m) => [m[1], m[2]]),
);

async function approve(form) {
  const userCode = form.get('user_code');
  const account = form.get('account') ?? '';
  const deny = form.get('deny') === '1';
  if (!userCode) return [400, { error: 'user_code is required' }];
  const browser = new Browser();
  // GET /device?user_code= answers an auto-posting form carrying the xsrf secret.
  const page = await (await browser.go(`/device?user_code=${encodeURIComponent(userCode)}`)).text();
  const { xsrf } = hiddenInputs(page);
  if (!xsrf) return [500, { error: 'no xsrf in the device page' }];
  const code = await provider.DeviceCode.findByUserCode(userCode.replace(/[^A-Za-z0-9]/g, '').toUpperCase(), { ignoreExpiration: true });
  const posted = await browser.go('/device', {
    method: 'POST',
    form: deny ? { xsrf, user_code: userCode, abort: 'yes' } : { xsrf, user_code: userCode, confirm: 'yes' },
  });
  const { res } = await browser.follow(posted, account);
  const body = await res.text();
  const after = code && await provider.DeviceCode.find(code.jti, { ignoreExpiration: true });
  if (after?.accountId) {
    accountByToken.set(code.jti, emailBySub.get(after.accountId));
    return [200, { approved: true }];
  }
  if (after?.error) return [200, { approved: false, error: after.error }];
  return [400, { approved: false, status: res.status, page: body.slice(0, 500) }];
}

async function authorize(url, res) {
  const params = new URLSearchParams(url.search);
  const account = params.get('account') ?? '';
  params.delete('account');
  const browser = new Browser();
  const first = await browser.go(`/auth?${params}`);
  const { res: last, location } = await browser.follow(first, account);
  if (location) {
    res.writeHead(303, { location });
    res.end();
    return;
  }
  // An error the provider shows itself (a bad redirect_uri or client): its page, its status.
  res.writeHead(last.status === 200 ? 400 : last.status, { 'content-type': 'text/html; charset=utf-8' });
  res.end(await last.text());
}

async function revokeAll(form) {
  const email = known(form.get('account'))?.email;
  if (!email) return [400, { error: 'unknown account' }];
  const grants = [...(grantsByAccount.get(email) ?? [])];
  for (const grantId of grants) {
    await Promise.all([
      provider.AccessToken.revokeByGrantId(grantId),
      provider.RefreshToken.revokeByGrantId(grantId),
      provider.AuthorizationCode.revokeByGrantId(grantId),
      provider.DeviceCode.revokeByGrantId(grantId),
      provider.Grant.adapter.destroy(grantId),
    ]);
  }
  grantsByAccount.delete(email);
  return [200, { revoked: grants.length }];
}

function setTtl(form) {
  const email = known(form.get('account'))?.email;
  const ttl = Number(form.get('access_ttl'));
  if (!email || !Number.isInteger(ttl) || ttl < 0) return [400, { error: 'account and access_ttl >= 0 are required' }];
  if (ttl === 0) ttlByAccount.delete(email); else ttlByAccount.set(email, ttl);
  return [200, { account: email, access_ttl: ttl || accessTtl }];
}

function statsFor(url) {
  const only = url.searchParams.get('account')?.toLowerCase();
  const accounts = Object.fromEntries([...stats].filter(([email]) => !only || email === only));
  if (only && !accounts[only]) accounts[only] = statsOf(only);
  return [200, { provider: 'mailgate-oauth-delegated', protocol: PROTOCOL, issuer, accounts }];
}

async function readForm(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return new URLSearchParams(Buffer.concat(chunks).toString());
}

// The token-endpoint hold (POST /test/hold), per account: the releases of its held requests,
// and how many were dropped because their client closed first.
const holds = new Map();
const holdOf = (email) => {
  if (!holds.has(email)) holds.set(email, { on: false, held: new Set(), dropped: 0 });
  return holds.get(email);
};

// Reads the token request's body, then holds it when its refresh token is a held account's;
// true when it should go on to the provider (which reads `req.body` once the stream is read).
async function passToken(req, res) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  req.body = Buffer.concat(chunks).toString();
  const params = new URLSearchParams(req.body);
  const email = params.get('grant_type') === 'refresh_token'
    ? accountByToken.get(params.get('refresh_token') ?? '') : undefined;
  const state = email && holds.get(email);
  if (!state?.on) return true;
  return new Promise((resolve) => {
    const entry = { release: () => { state.held.delete(entry); resolve(true); } };
    state.held.add(entry);
    res.on('close', () => {
      if (!state.held.has(entry)) return;
      state.held.delete(entry);
      state.dropped += 1;
      resolve(false);
    });
  });
}

function setHold(form) {
  const email = known(form.get('account'))?.email;
  if (!email) return [400, { error: 'unknown account' }];
  const state = holdOf(email);
  state.on = form.get('on') === '1';
  if (!state.on) for (const entry of [...state.held]) entry.release();
  return [200, { held: state.held.size }];
}

function tokensOf(url) {
  const email = known(url.searchParams.get('account'))?.email;
  if (!email) return [400, { error: 'unknown account' }];
  const tokens = [...accountByToken].filter(([, owner]) => owner === email).map(([token]) => token);
  return [200, { tokens }];
}

function heldOf(url) {
  const email = known(url.searchParams.get('account'))?.email;
  if (!email) return [400, { error: 'unknown account' }];
  const state = holdOf(email);
  return [200, { held: state.held.size, dropped: state.dropped }];
}

const oidc = provider.callback();
server.on('request', async (req, res) => {
  const url = new URL(req.url, issuer);
  const json = ([status, body]) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  try {
    const interaction = url.pathname.match(/^\/interaction\/([^/]+)$/);
    if (interaction && req.method === 'GET') await interactionPage(req, res, interaction[1]);
    else if (interaction && req.method === 'POST') await interactionSubmit(req, res, await readForm(req));
    else if (url.pathname === '/test/approve' && req.method === 'POST') json(await approve(await readForm(req)));
    else if (url.pathname === '/test/authorize' && req.method === 'GET') await authorize(url, res);
    else if (url.pathname === '/test/revoke-all' && req.method === 'POST') json(await revokeAll(await readForm(req)));
    else if (url.pathname === '/test/ttl' && req.method === 'POST') json(setTtl(await readForm(req)));
    else if (url.pathname === '/test/stats' && req.method === 'GET') json(statsFor(url));
    else if (url.pathname === '/test/hold' && req.method === 'POST') json(setHold(await readForm(req)));
    else if (url.pathname === '/test/held' && req.method === 'GET') json(heldOf(url));
    else if (url.pathname === '/test/tokens' && req.method === 'GET') json(tokensOf(url));
    else if (holds.size > 0 && url.pathname === '/token' && req.method === 'POST') {
      if (await passToken(req, res)) oidc(req, res);
    } else oidc(req, res);
  } catch (e) {
    if (!res.headersSent) json([500, { error: String(e?.message ?? e) }]);
  }
});

if (args.includes('--exit-on-stdin-eof')) {
  process.stdin.on('end', () => process.exit(0));
  process.stdin.on('error', () => process.exit(0));
  process.stdin.resume();
}
console.log(`issuer ${issuer}`);
