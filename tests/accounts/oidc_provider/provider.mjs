// A real OpenID provider for the sign-in tests: panva's certified oidc-provider, configured from a JSON file
// (argv[2]) that the test writes: {port, issuer, jwks, clients, users, idTokenTtl}. Users sign in on a small
// login form of our own (their password is checked); consent is given for the test's first-party client, as
// the library's "skip consent" recipe does. Prints "ready <issuer>" once it listens on 127.0.0.1.
import { readFileSync } from 'node:fs';
import http from 'node:http';
import Provider from 'oidc-provider';

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
// The users are read again at every use: a test changes their claims in the file between two sign-ins.
const users = () => new Map(JSON.parse(readFileSync(process.argv[2], 'utf8')).users.map((u) => [u.sub, u]));

const provider = new Provider(config.issuer, {
  clients: config.clients,
  jwks: config.jwks,
  cookies: { keys: ['hpcfair-test-cookie-key'] },
  pkce: { required: () => true },
  conformIdTokenClaims: false, // the scopes' claims in the ID token itself, as many IdPs do
  claims: {
    openid: ['sub'],
    profile: ['preferred_username', 'name', 'given_name', 'family_name', 'orcid'],
    email: ['email', 'email_verified'],
    groups: ['groups'],
  },
  scopes: ['openid', 'profile', 'email', 'groups', 'offline_access'],
  features: { devInteractions: { enabled: false }, rpInitiatedLogout: { enabled: true } },
  ttl: { IdToken: config.idTokenTtl || 3600 },
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  async findAccount(ctx, sub) {
    const user = users().get(sub);
    if (!user) return undefined;
    return {
      accountId: sub,
      async claims() {
        const { password, ...claims } = user; // eslint-disable-line no-unused-vars
        return claims;
      },
    };
  },
  async loadExistingGrant(ctx) {
    const grantId = ctx.oidc.result?.consent?.grantId || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
    if (grantId) return ctx.oidc.provider.Grant.find(grantId);
    const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId,
                                                accountId: ctx.oidc.session.accountId });
    grant.addOIDCScope(ctx.oidc.requestParamScopes ? [...ctx.oidc.requestParamScopes].join(' ') : 'openid');
    grant.addOIDCClaims(['sub', 'preferred_username', 'name', 'given_name', 'family_name', 'orcid', 'email',
                         'email_verified', 'groups']);
    await grant.save();
    return grant;
  },
});

function page(res, body, status = 200) {
  res.writeHead(status, { 'Content-Type': 'text/html; charset=utf-8' });
  res.end(`<!doctype html><html><head><title>Test IdP</title></head><body>${body}</body></html>`);
}

function form(uid, error = '') {
  return `<h1>Test IdP sign-in</h1>${error ? `<p id="error">${error}</p>` : ''}
<form method="post" action="/interaction/${uid}">
<label for="login">Username</label><input id="login" name="login" required>
<label for="password">Password</label><input id="password" name="password" type="password" required>
<button type="submit">Sign in to the IdP</button></form>`;
}

async function interaction(req, res) {
  const details = await provider.interactionDetails(req, res);
  if (req.method === 'GET') return page(res, form(details.uid));
  let body = '';
  for await (const chunk of req) body += chunk;
  const fields = new URLSearchParams(body);
  const user = [...users().values()].find((u) => u.preferred_username === fields.get('login'));
  if (!user || user.password !== fields.get('password')) {
    return page(res, form(details.uid, 'Wrong username or password'), 401);
  }
  return provider.interactionFinished(req, res, { login: { accountId: user.sub } }, { mergeWithLastSubmission: false });
}

const callback = provider.callback();
http.createServer((req, res) => {
  if (req.url.startsWith('/interaction/')) {
    interaction(req, res).catch((error) => page(res, `<p id="error">${error.message}</p>`, 400));
  } else {
    callback(req, res);
  }
}).listen(config.port, '127.0.0.1', () => console.log(`ready ${config.issuer}`));
