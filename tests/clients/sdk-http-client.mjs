#!/usr/bin/env node
// The official TypeScript MCP SDK client against `mailgate serve --http` on the demo mailboxes,
// over its Streamable HTTP client transport with the bearer token in `requestInit.headers`, as an
// HTTP user of the SDK would configure it: a wrong or missing token and a foreign Origin cannot
// connect (401 / 403), the catalog is exactly the twelve read tools although the server was
// started with every gate open, the write, handoff and send tools cannot be called by name, read
// calls answer, invalid arguments are a tool result, the server is stateless (no session id), and
// the SDK prints nothing through the console.
//
// Usage: OUTLOOK_HTTP_BEARER_TOKEN=<token> node sdk-http-client.mjs http://127.0.0.1:PORT/mcp
// The server must already be running (tests/it/real_clients.rs starts it). Prints one line per
// check to stdout; exits 1 at the first failed check.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { READ, captureConsole, check, textOf } from './catalog.mjs';

const url = process.argv[2];
const token = process.env.OUTLOOK_HTTP_BEARER_TOKEN;
if (!url || !token) {
  process.stderr.write('usage: OUTLOOK_HTTP_BEARER_TOKEN=<token> node sdk-http-client.mjs http://127.0.0.1:PORT/mcp\n');
  process.exit(2);
}

// Anything a library prints through the console is counted: a schema warning is a failure.
const consoleLines = captureConsole();

// Every gate is open in the server's environment; over HTTP none of these may be served.
const GATED = [
  'create_attachment_handoff',
  'get_attachment_handoff',
  'move_messages',
  'copy_messages',
  'mark_messages',
  'download_attachments',
  'create_draft',
  'send_email',
];
// The demo's ledger message (its Maildir file names, hence its ids, are fixed): a CSV attachment.
const DEMO_CSV = 'SU5CT1gKMTc4Mjk4NTIwMC5NMTA3UDIuZGVtbw';

function client(headers) {
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  return { transport, client: new Client({ name: 'mailgate-sdk-http-client', version: '1.0.0' }) };
}

/** `headers` must not get past `initialize`: the SDK's error carries the HTTP status. */
async function refused(label, headers, status) {
  const { transport, client: c } = client(headers);
  let error;
  try {
    await c.connect(transport);
  } catch (caught) {
    error = caught;
  } finally {
    await c.close();
  }
  check(error !== undefined, `${label}: connected`);
  check(
    error instanceof StreamableHTTPError && error.code === status,
    `${label}: expected HTTP ${status}, got ${error?.constructor?.name} ${error?.code}: ${error?.message}`
  );
  process.stdout.write(`ok ${label}: HTTP ${status}\n`);
}

async function call(c, name, args) {
  const result = await c.callTool({ name, arguments: args });
  check(result.isError !== true, `${name}: ${textOf(result)}`);
  return result.structuredContent;
}

async function main() {
  await refused('wrong token', { Authorization: `Bearer not-${token}` }, 401);
  await refused('no token', {}, 401);
  await refused(
    'foreign Origin',
    { Authorization: `Bearer ${token}`, Origin: 'https://attacker.example.com' },
    403
  );

  const { transport, client: c } = client({ Authorization: `Bearer ${token}` });
  try {
    await c.connect(transport);
    const server = c.getServerVersion();
    check(server?.name === 'mailgate', `initialize: server ${JSON.stringify(server)}`);
    check(transport.sessionId === undefined, `stateless: got session id ${transport.sessionId}`);
    process.stdout.write(`ok initialize: ${server.name} ${server.version}, no session id\n`);

    const { tools } = await c.listTools();
    const names = tools.map((tool) => tool.name).sort();
    check(
      JSON.stringify(names) === JSON.stringify([...READ].sort()),
      `tools (${names.length}) ${names.join(', ')}; expected the ${READ.length} read tools`
    );
    for (const tool of tools) {
      check(tool.annotations?.readOnlyHint === true, `${tool.name} readOnlyHint ${tool.annotations?.readOnlyHint}`);
      check(tool.annotations?.destructiveHint === false, `${tool.name} destructiveHint`);
    }
    process.stdout.write(`ok tools/list: ${names.length} read-only tools\n`);

    const mailboxes = await call(c, 'list_allowed_mailboxes', {});
    check(
      JSON.stringify([...mailboxes.mailboxes].sort()) === JSON.stringify(['archive', 'finance', 'personal', 'support']),
      `list_allowed_mailboxes answered ${JSON.stringify(mailboxes)}`
    );
    process.stdout.write(`ok list_allowed_mailboxes: ${mailboxes.mailboxes.join(', ')}\n`);

    const found = await call(c, 'search_mailbox', {
      mailbox: 'finance',
      criteria: { query: 'invoice', maxResults: 3 },
    });
    check(found.messages?.length > 0, `search_mailbox found nothing: ${JSON.stringify(found)}`);
    process.stdout.write(`ok search_mailbox: ${found.messages.length} message(s), ${found.status}\n`);

    const message = await call(c, 'get_message', { mailbox: 'finance', messageId: found.messages[0].id });
    check(
      message.message?.id === found.messages[0].id,
      `get_message answered ${JSON.stringify(message).slice(0, 300)}`
    );
    process.stdout.write('ok get_message\n');

    const listing = await call(c, 'list_messages', { mailbox: 'finance', criteria: { subject: 'ledger' } });
    check(
      listing.messages?.some((m) => m.id === DEMO_CSV),
      `list_messages did not list the ledger message: ${JSON.stringify(listing).slice(0, 300)}`
    );
    const folders = await call(c, 'list_folders', { mailbox: 'finance' });
    check(folders.folders?.length > 0, `list_folders: ${JSON.stringify(folders)}`);
    const attachments = await call(c, 'list_attachments', { mailbox: 'finance', messageId: DEMO_CSV });
    const attachmentId = attachments.attachments?.[0]?.id;
    check(attachmentId !== undefined, `list_attachments: ${JSON.stringify(attachments)}`);
    const content = await call(c, 'get_attachment_content', {
      mailbox: 'finance',
      messageId: DEMO_CSV,
      attachmentId,
      mode: 'text',
    });
    check(
      content.name === 'ledger-2026-06.csv' && content.text?.startsWith('date,reference,description,amount_eur\n'),
      `get_attachment_content: ${JSON.stringify(content).slice(0, 300)}`
    );
    process.stdout.write('ok list_messages, list_folders, list_attachments, get_attachment_content\n');

    // Resources, templates, completion and prompts over HTTP (issue 22).
    const { resourceTemplates } = await c.listResourceTemplates();
    check(resourceTemplates.length === 4, `templates: ${JSON.stringify(resourceTemplates)}`);
    const contacts = JSON.parse(
      (await c.readResource({ uri: 'mailgate://finance/contacts?query=example' })).contents[0].text
    );
    check(
      contacts.source === 'headers' && contacts.dataTrust === 'UNTRUSTED_EMAIL_DATA_V1',
      `contacts: ${JSON.stringify(contacts).slice(0, 300)}`
    );
    const policy = JSON.parse((await c.readResource({ uri: 'mailgate://policy' })).contents[0].text);
    check(policy.catalog === 'read' && policy.gates.send === false, `policy over HTTP (read-only whatever the gates): ${JSON.stringify(policy.gates)}`);
    const completion = await c.complete({
      ref: { type: 'ref/resource', uri: 'mailgate://{alias}/contacts{?query}' },
      argument: { name: 'alias', value: 'sup' },
    });
    check(
      JSON.stringify(completion.completion.values) === '["support"]',
      `completion: ${JSON.stringify(completion)}`
    );
    const evidence = await c.getPrompt({
      name: 'find_evidence',
      arguments: { question: 'who sent the ledger?', mailboxes: 'finance' },
    });
    check(
      evidence.messages[0].content.text.includes('investigate_documents'),
      `prompts/get: ${JSON.stringify(evidence).slice(0, 300)}`
    );
    process.stdout.write('ok resources/templates/list, resources/read, completion/complete, prompts/get\n');

    // Invalid arguments reach the model as a tool result naming the field, not an exception.
    const invalid = await c.callTool({
      name: 'search_mailbox',
      arguments: { mailbox: 'finance', criteria: { maxResults: 101 } },
    });
    check(
      invalid.isError === true &&
        textOf(invalid).startsWith('INVALID_ARGUMENT: ') &&
        textOf(invalid).includes('criteria.maxResults') &&
        invalid._meta?.['mailgate/errorCode'] === 'INVALID_ARGUMENT',
      `invalid arguments answered ${JSON.stringify(invalid)}`
    );
    process.stdout.write('ok invalid arguments are a tool result\n');

    // A tool outside the catalog is a protocol error (JSON-RPC invalid params), whatever the gates.
    for (const name of [...GATED, 'delete_email']) {
      let error;
      try {
        await c.callTool({ name, arguments: {} });
      } catch (caught) {
        error = caught;
      }
      check(error?.code === -32602, `${name}: expected a -32602 protocol error, got ${error?.code} ${error?.message}`);
      const text = name === 'delete_email' ? 'tool not found in this catalog' : `tool ${name} is not in this catalog`;
      check(String(error.message).includes(text), `${name}: refused with "${error.message}"`);
      if (name === 'send_email') {
        process.stdout.write(`ok send_email refused: ${error.message}\n`);
      }
    }
    process.stdout.write(`ok ${GATED.length} gated tools and an unknown one are protocol errors\n`);
  } finally {
    await c.close();
  }
  check(consoleLines.length === 0, `the SDK printed ${consoleLines.length} console line(s)`);
}

try {
  await main();
  process.stdout.write('sdk http client: all checks passed\n');
} catch (error) {
  process.stdout.write(`FAILED: ${error.message}\n`);
  if (consoleLines.length > 0) {
    process.stdout.write(`(${consoleLines.length} console line(s), first: ${consoleLines[0]})\n`);
  }
  process.exitCode = 1;
}
