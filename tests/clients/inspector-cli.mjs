#!/usr/bin/env node
// MCP Inspector's CLI mode (the version npm installs on Node 20) calls every read tool of mailgate
// on the demo mailboxes with every argument its schema declares, as a user would type them:
//   mcp-inspector --cli mailgate serve --method tools/call --tool-name X --tool-arg key=value ...
// The Inspector turns each `key=value` into JSON by the *top-level* property's `type` only
// (integer, boolean, object, array); anything else arrives as a string. So a property without a
// plain `type` (a bare `$ref`, `["integer","null"]`) cannot be passed, and this test fails.
//
// Usage: node inspector-cli.mjs /path/to/mailgate
//        node inspector-cli.mjs --http http://127.0.0.1:PORT/mcp
// The first form starts `mailgate serve` itself for every call: the environment must let it start
// on the demo (OUTLOOK_PLUGIN_CONFIG pointing at the demo's plugin.json, MAILGATE_HOME); the
// Inspector passes it on to the server. The second form calls a running `mailgate serve --http`
// on the demo over Streamable HTTP (`--transport http`). Inspector 0.15's CLI has no option for a
// request header, so it cannot send a bearer token: that server must run with
// OUTLOOK_HTTP_ALLOW_NO_AUTH=true.
// Prints one line per call; exits 1 when any call failed. Run by tests/it/real_clients.rs.

import { execFile } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { READ } from './catalog.mjs';

const run = promisify(execFile);
const here = dirname(fileURLToPath(import.meta.url));
const inspector = join(here, 'node_modules', '@modelcontextprotocol', 'inspector', 'cli', 'build', 'cli.js');
const http = process.argv[2] === '--http' ? process.argv[3] : undefined;
const mailgate = !http && process.argv[2] && resolve(process.argv[2]);
if (!mailgate && !http) {
  process.stderr.write(
    'usage: node inspector-cli.mjs /path/to/mailgate\n' +
      '       node inspector-cli.mjs --http http://127.0.0.1:PORT/mcp\n'
  );
  process.exit(2);
}
// What the Inspector is pointed at: a command it starts, or a URL.
const target = http ? [http, '--transport', 'http'] : [mailgate, 'serve'];

/** Runs the Inspector CLI once; resolves to its parsed JSON answer or throws with its output. */
async function inspect(method, toolName, args = {}, extra = []) {
  const argv = [inspector, '--cli', ...target, '--method', method, ...extra];
  if (toolName) {
    argv.push('--tool-name', toolName);
  }
  for (const [key, value] of Object.entries(args)) {
    const text = typeof value === 'string' ? value : JSON.stringify(value);
    argv.push('--tool-arg', `${key}=${text}`);
  }
  try {
    const { stdout } = await run(process.execPath, argv, {
      env: process.env,
      timeout: 60_000,
      maxBuffer: 16 * 1024 * 1024,
    });
    return JSON.parse(stdout);
  } catch (error) {
    const output = `${error.stdout ?? ''}${error.stderr ?? ''}`
      .split('\n')
      .filter((line) => !line.includes('ignored in schema'))
      .join('\n')
      .trim();
    throw new Error(output || String(error.message ?? error));
  }
}

const CRITERIA = {
  query: 'invoice',
  sender: 'northwind',
  subject: 'Invoice',
  dateFrom: '2026-01-01',
  dateTo: '2026-12-31',
  hasAttachments: true,
  isRead: true,
  folder: 'inbox',
  maxResults: 5,
  maxPages: 2,
  sortBy: 'receivedDateTime',
  sortOrder: 'desc',
  includeAttachmentNames: true,
  expandTerms: false,
  source: 'live',
};
// A filter listing (no query) that finds the CSV message.
const FILTERS = {
  sender: 'sofia',
  subject: 'ledger',
  dateFrom: '2026-01-01T00:00:00Z',
  dateTo: '2026-12-31',
  hasAttachments: true,
  isRead: false,
  folder: 'inbox',
  maxResults: 5,
  maxPages: 1,
  sortBy: 'subject',
  sortOrder: 'asc',
  includeAttachmentNames: true,
  expandTerms: false,
  source: 'live',
};
const SIGNALS = {
  keywords: ['ledger'],
  clients: ['Orchard Bakery'],
  insurers: ['Northwind'],
  proposalIds: ['PROP-1001'],
  attachmentNames: ['ledger-2026-06.csv'],
};

/** The calls: [tool, arguments, expected in-band error code or null]. */
function calls(csv, zip, cursors) {
  // A cursor redeems only in the process that issued it: over HTTP one server answers every
  // call, over stdio the Inspector starts a new one per call, where it has expired.
  const continued = http ? null : 'INVALID_ARGUMENT';
  return [
    ['list_allowed_mailboxes', {}, null],
    [
      'search_mailbox',
      { mailbox: 'finance', criteria: { query: 'invoice', maxResults: 1 }, cursor: cursors.search },
      continued,
    ],
    [
      'list_messages',
      { mailbox: 'finance', criteria: { maxResults: 2 }, cursor: cursors.listing },
      continued,
    ],
    // The demo is Maildir, which keeps no categories: refused, naming the field, never ignored.
    ['search_mailbox', { mailbox: 'finance', criteria: { categories: ['Invoices'] } }, 'UNSUPPORTED'],
    ['list_messages', { mailbox: 'finance', criteria: { categories: ['Invoices'] } }, 'UNSUPPORTED'],
    ['search_mailboxes', { mailboxes: ['finance'], criteria: { categories: ['Invoices'] } }, null],
    // No demo body, attachment list, attachment text or folder tree is long enough to be cut:
    // a forged cursor is refused.
    ['get_message', { mailbox: 'finance', messageId: csv, cursor: 'AAAA' }, 'INVALID_ARGUMENT'],
    ['list_attachments', { mailbox: 'finance', messageId: csv, cursor: 'AAAA' }, 'INVALID_ARGUMENT'],
    [
      'get_attachment_content',
      { mailbox: 'finance', messageId: csv, attachmentId: 'att-0', cursor: 'AAAA' },
      'INVALID_ARGUMENT',
    ],
    ['list_folders', { mailbox: 'finance', cursor: 'AAAA' }, 'INVALID_ARGUMENT'],
    [
      'investigate_documents',
      { mailbox: 'finance', criteria: { keywords: ['ledger'] }, cursor: 'AAAA' },
      'INVALID_ARGUMENT',
    ],
    // The demo's four mailboxes fit one fan-out and its batches fit their budgets.
    ['search_mailboxes', { criteria: { maxResults: 1 }, cursor: 'AAAA' }, 'INVALID_ARGUMENT'],
    ['search_mailboxes_batch', { queries: [{ label: 'a' }], cursor: 'AAAA' }, 'INVALID_ARGUMENT'],
    ['search_mailbox', { mailbox: 'finance', criteria: CRITERIA }, null],
    ['search_mailboxes', { mailboxes: ['finance', 'personal'], criteria: CRITERIA }, null],
    [
      'search_mailboxes_batch',
      {
        queries: [
          { label: 'invoices', mailboxes: ['finance'], criteria: CRITERIA },
          { label: 'ledger', mailboxes: ['finance', 'personal'], criteria: FILTERS },
        ],
      },
      null,
    ],
    ['list_messages', { mailbox: 'finance', criteria: FILTERS }, null],
    ['list_messages', { mailbox: 'finance', criteria: CRITERIA }, null],
    [
      'get_message',
      {
        mailbox: 'finance',
        messageId: csv,
        format: 'text',
        offset: 0,
        recipientOffset: 0,
        maxBodyChars: 2000,
      },
      null,
    ],
    ['list_folders', { mailbox: 'finance' }, null],
    ['get_folder_stats', { mailbox: 'finance', folderId: 'inbox' }, null],
    ['list_attachments', { mailbox: 'finance', messageId: csv, limit: 10, offset: 0 }, null],
    [
      'get_attachment_content',
      { mailbox: 'finance', messageId: csv, attachmentId: 'att-0', mode: 'text' },
      null,
    ],
    [
      'get_attachment_content',
      { mailbox: 'finance', messageId: csv, attachmentId: 'att-0', mode: 'raw' },
      null,
    ],
    // Every argument must arrive intact: the encrypted entry is read with its password (a
    // mangled argument would be INVALID_ARGUMENT, ZIP_ENTRY_NOT_FOUND or ZIP_PASSWORD_INCORRECT).
    [
      'get_attachment_content',
      {
        mailbox: 'finance',
        messageId: zip,
        attachmentId: 'att-0',
        mode: 'raw',
        entry: 'secret.txt',
        password: 'demo-zip-2026',
      },
      null,
    ],
    [
      'inspect_attachment_evidence',
      { mailbox: 'finance', messageId: csv, attachmentId: 'att-0', ...SIGNALS },
      null,
    ],
    [
      'investigate_documents',
      {
        mailbox: 'finance',
        criteria: {
          ...SIGNALS,
          folders: ['inbox', 'archive'],
          maxMessagesPerFolder: 50,
          maxPagesPerFolder: 2,
          maxAttachmentsPerMessage: 5,
          maxAttachmentPagesPerMessage: 2,
          maxResults: 10,
          source: 'live',
        },
      },
      null,
    ],
  ];
}

/** A schema's own properties, following one `$ref` into `$defs` (and `anyOf` with null). */
function properties(schema, node) {
  let current = node;
  for (let depth = 0; current && depth < 4; depth += 1) {
    if (current.properties) {
      return current.properties;
    }
    const ref = current.$ref ?? (current.anyOf ?? []).find((s) => s.$ref)?.$ref;
    if (!ref) {
      return {};
    }
    current = schema.$defs?.[ref.split('/').pop()];
  }
  return {};
}

const failures = [];
function fail(message) {
  failures.push(message);
  process.stdout.write(`FAILED ${message}\n`);
}

const { tools } = await inspect('tools/list');
const byName = Object.fromEntries(tools.map((tool) => [tool.name, tool]));

// The ids of the CSV message and the ZIP message. The demo's ids are fixed (its Maildir file names
// are); the listing confirms the CSV one, and the ZIP message is older than the default page.
const DEMO_CSV = 'SU5CT1gKMTc4Mjk4NTIwMC5NMTA3UDIuZGVtbw';
const DEMO_ZIP = 'SU5CT1gKMTc3ODU5OTgwMC5NMTAwUDIuZGVtbw';
const listing = await inspect('tools/call', 'list_messages', { mailbox: 'finance' });
const listed = listing.structuredContent?.messages?.find((m) => m.subject === 'Bank ledger export June');
if (listed?.id !== DEMO_CSV) {
  fail(`list_messages without criteria did not list the ledger message as ${DEMO_CSV}: ${JSON.stringify(listed)}`);
}
const [csv, zip] = [DEMO_CSV, DEMO_ZIP];

const firstPage = async (tool, criteria) =>
  (await inspect('tools/call', tool, { mailbox: 'finance', criteria })).structuredContent?.nextCursor;
const cursors = {
  search: await firstPage('search_mailbox', { query: 'invoice', maxResults: 1 }),
  listing: await firstPage('list_messages', { maxResults: 2 }),
};
if (!cursors.search || !cursors.listing) {
  fail(`no nextCursor on a cut first page: ${JSON.stringify(cursors)}`);
}
const planned = calls(csv, zip, cursors);
// Every argument of every read tool: each declared property (and each criteria property) is used
// by some call; a call passes only what the tool declares (so a renamed field fails here, not as
// an unknown field).
const used = {};
for (const [tool, args] of planned) {
  const declared = properties(byName[tool]?.inputSchema ?? {}, byName[tool]?.inputSchema ?? {});
  for (const key of Object.keys(args)) {
    if (!(key in declared)) {
      delete args[key];
    }
  }
  used[tool] ??= new Set();
  for (const [key, value] of Object.entries(args)) {
    used[tool].add(key);
    if (key === 'criteria') {
      for (const inner of Object.keys(value)) {
        used[tool].add(`criteria.${inner}`);
      }
    }
    if (key === 'queries') {
      for (const query of value) {
        for (const inner of Object.keys(query)) {
          used[tool].add(`queries.${inner}`);
        }
      }
    }
  }
}
for (const tool of READ) {
  const schema = byName[tool]?.inputSchema;
  if (!schema) {
    fail(`${tool} is not listed`);
    continue;
  }
  const top = properties(schema, schema);
  const wanted = Object.keys(top);
  if (top.criteria) {
    wanted.push(...Object.keys(properties(schema, top.criteria)).map((k) => `criteria.${k}`));
  }
  if (top.queries?.items) {
    wanted.push(...Object.keys(properties(schema, top.queries.items)).map((k) => `queries.${k}`));
  }
  const missing = wanted.filter((key) => !used[tool]?.has(key));
  if (missing.length > 0) {
    fail(`${tool}: no call passes ${missing.join(', ')}`);
  }
}

// Two at a time: each call is two node processes (and, over stdio, a mailgate).
const queue = planned.map((call, index) => ({ call, index }));
async function worker() {
  for (let item = queue.shift(); item; item = queue.shift()) {
    const [tool, args, expectedCode] = item.call;
    const label = `${tool} ${Object.keys(args).join(',')}`;
    try {
      const result = await inspect('tools/call', tool, args);
      const code = result._meta?.['mailgate/errorCode'] ?? null;
      const text = (result.content ?? []).map((c) => c.text ?? '').join(' ').slice(0, 300);
      if (expectedCode === null && result.isError === true) {
        fail(`${label}: isError ${code}: ${text}`);
      } else if (expectedCode !== null && code !== expectedCode) {
        fail(`${label}: expected ${expectedCode}, got ${code}: ${text}`);
      } else {
        process.stdout.write(`ok ${label}${expectedCode ? ` (${expectedCode})` : ''}\n`);
      }
    } catch (error) {
      fail(`${label}: the Inspector failed: ${error.message.slice(0, 400)}`);
    }
  }
}
await Promise.all([worker(), worker()]);

// Resources and prompts (issue 22), as the Inspector lists and reads them.
const surface = [
  ['resources/list', [], (r) => r.resources?.some((x) => x.uri === 'mailgate://policy')],
  ['resources/templates/list', [], (r) => r.resourceTemplates?.length === 4],
  [
    'resources/read',
    ['--uri', 'mailgate://finance/folders'],
    (r) => JSON.parse(r.contents?.[0]?.text ?? '{}').folders?.length > 0,
  ],
  ['prompts/list', [], (r) => r.prompts?.length === 4],
  [
    'prompts/get',
    ['--prompt-name', 'triage_inbox', '--prompt-args', 'mailbox=personal'],
    (r) => r.messages?.[0]?.content?.text?.includes('list_messages'),
  ],
];
for (const [method, extra, good] of surface) {
  try {
    const result = await inspect(method, undefined, {}, extra);
    if (good(result)) {
      process.stdout.write(`ok ${method}\n`);
    } else {
      fail(`${method}: ${JSON.stringify(result).slice(0, 300)}`);
    }
  } catch (error) {
    fail(`${method}: the Inspector failed: ${error.message.slice(0, 400)}`);
  }
}

if (failures.length > 0) {
  process.stdout.write(`inspector cli: ${failures.length} failure(s)\n`);
  process.exitCode = 1;
} else {
  process.stdout.write(`inspector cli: ${planned.length + surface.length} calls passed\n`);
}
