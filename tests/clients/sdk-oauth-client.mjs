// The TypeScript MCP SDK as a remote person's machine client (issue 29, item 5): its
// ClientCredentialsProvider does the whole discovery and OAuth flow itself (401 challenge →
// Protected Resource Metadata → the authorization server's metadata → a token for the resource),
// then lists the tools and calls list_allowed_mailboxes. Prints one JSON line with what it saw.
//
// Usage: node sdk-oauth-client.mjs <MCP URL> <issuer> <client id> <client secret>
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ClientCredentialsProvider } from '@modelcontextprotocol/sdk/client/auth-extensions.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [url, issuer, clientId, clientSecret] = process.argv.slice(2);
const authProvider = new ClientCredentialsProvider({
  clientId,
  clientSecret,
  scope: 'mail.read',
  expectedIssuer: issuer,
});
const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider });
const client = new Client({ name: 'mailgate-oauth-e2e', version: '0.0.0' });
await client.connect(transport);
const tools = (await client.listTools()).tools.map((t) => t.name);
const listed = await client.callTool({ name: 'list_allowed_mailboxes', arguments: {} });
const other = await client.callTool({ name: 'list_folders', arguments: { mailbox: 'personal' } });
console.log(
  JSON.stringify({
    tools: tools.length,
    mailboxes: listed.structuredContent?.mailboxes,
    otherRefused: other.isError === true,
  }),
);
await client.close();
