// A real OAuth 2.1 authorization server for mailgate's end-to-end test (issue 29, item 5):
// oidc-provider (OpenID Certified; nobody on this project wrote it) on a loopback port, with the
// client credentials grant, resource indicators (RFC 8707) and RFC 9068 JWT access tokens signed
// ES256 by a key made at start. One confidential client, `mailgate-e2e`. Prints
// `issuer <URL>` once it listens, then serves until killed.
//
// Usage: node oidc-issuer.mjs <the MCP server's canonical URL> <client secret>
import http from 'node:http';

import { exportJWK, generateKeyPair } from 'jose';
import Provider from 'oidc-provider';

const [resource, secret] = process.argv.slice(2);
const { privateKey } = await generateKeyPair('ES256', { extractable: true });
const jwk = { ...(await exportJWK(privateKey)), kid: 'e2e-1', alg: 'ES256', use: 'sig' };

const server = http.createServer();
await new Promise((done) => server.listen(0, '127.0.0.1', done));
const issuer = `http://127.0.0.1:${server.address().port}`;

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: 'mailgate-e2e',
      client_secret: secret,
      grant_types: ['client_credentials'],
      redirect_uris: [],
      response_types: [],
      token_endpoint_auth_method: 'client_secret_basic',
      id_token_signed_response_alg: 'ES256',
      scope: 'mail.read',
    },
  ],
  jwks: { keys: [jwk] },
  scopes: ['mail.read'],
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => resource,
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, requested) => {
        if (requested !== resource) throw new Error(`unknown resource ${requested}`);
        return {
          scope: 'mail.read',
          audience: resource,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'ES256' } },
        };
      },
    },
  },
});
server.on('request', provider.callback());
console.log(`issuer ${issuer}`);
