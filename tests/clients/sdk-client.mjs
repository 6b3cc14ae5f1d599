#!/usr/bin/env node
// The official TypeScript MCP SDK client against mailgate, with the minimal environment a user of
// the reference plugin gives it (no HOME): all eight gate settings with their exact tool sets and
// annotations, the exact `list_allowed_mailboxes` answer, invalid arguments as tool results, the
// four startup refusals of an incomplete send gate, and no console output from the SDK (its ajv
// prints `unknown format "uint32" ignored in schema` for non-standard formats).
//
// Usage: node sdk-client.mjs /path/to/mailgate
// Prints one line per check to stdout; exits 1 at the first failed check. Run by
// tests/it/real_clients.rs, which also requires this process's stderr to be empty.

import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { READ, captureConsole, check, textOf } from './catalog.mjs';

const mailgate = process.argv[2] && resolve(process.argv[2]);
if (!mailgate) {
  process.stderr.write('usage: node sdk-client.mjs /path/to/mailgate\n');
  process.exit(2);
}

// Anything a library prints through the console is counted: a schema warning is a failure.
const consoleLines = captureConsole();

const HANDOFF = ['create_attachment_handoff', 'get_attachment_handoff'];
const WRITE = ['move_messages', 'copy_messages', 'mark_messages', 'download_attachments', 'create_draft'];
const SEND = ['send_email'];
const READ_ONLY = [...READ, 'get_attachment_handoff'];
const DESTRUCTIVE = ['move_messages', 'mark_messages', 'send_email'];
const FORBIDDEN = ['reply_to_email', 'forward_email', 'delete_email', 'batch_delete_emails', 'delete_folder'];

const root = mkdtempSync(join(tmpdir(), 'mailgate-sdk-client-'));
chmodSync(root, 0o700);
const configPath = join(root, 'plugin.json');
const downloadRoot = join(root, 'downloads');
mkdirSync(downloadRoot, { mode: 0o700 });
writeFileSync(
  configPath,
  JSON.stringify({ mailboxes: [{ alias: 'test', address: 'test@example.com' }] }),
  { mode: 0o600 }
);
chmodSync(configPath, 0o600);

/** The reference smoke test's environment, plus the send gate and its variables. */
function environment(handoffs, writes, send, sendVars) {
  return {
    PATH: process.env.PATH ?? '',
    NODE_ENV: 'test',
    LOG_LEVEL: 'error',
    MICROSOFT_GRAPH_CLIENT_ID: '11111111-1111-4111-8111-111111111111',
    MICROSOFT_GRAPH_CLIENT_SECRET: 'sdk-client-secret',
    MICROSOFT_GRAPH_TENANT_ID: '22222222-2222-4222-8222-222222222222',
    TARGET_USER_EMAIL: 'test@example.com',
    OUTLOOK_PLUGIN_CONFIG: configPath,
    DOWNLOAD_DIR: downloadRoot,
    PLUGIN_ALLOW_LOCAL_HANDOFFS: String(handoffs),
    PLUGIN_ALLOW_WRITES: String(writes),
    PLUGIN_ALLOW_SEND: String(send),
    ...sendVars,
  };
}

const SENDER = { OUTLOOK_SEND_FROM: 'test@example.com', OUTLOOK_ALLOWED_SENDERS: 'test@example.com' };

async function scenario(handoffs, writes, send) {
  const label = `handoffs=${handoffs} writes=${writes} send=${send}`;
  const transport = new StdioClientTransport({
    command: mailgate,
    args: ['serve'],
    cwd: root,
    stderr: 'pipe',
    env: environment(handoffs, writes, send, send ? SENDER : {}),
  });
  let serverStderr = '';
  transport.stderr?.on('data', (chunk) => {
    serverStderr += chunk;
  });
  const client = new Client({ name: 'mailgate-sdk-client', version: '1.0.0' });
  try {
    await client.connect(transport);
    const { tools } = await client.listTools();
    const names = tools.map((tool) => tool.name).sort();
    const expected = [
      ...READ,
      ...(handoffs ? HANDOFF : []),
      ...(writes ? WRITE : []),
      ...(send ? SEND : []),
    ].sort();
    check(
      JSON.stringify(names) === JSON.stringify(expected),
      `${label}: tools (${names.length}) ${names.join(', ')}; expected ${expected.join(', ')}`
    );
    for (const tool of tools) {
      const hints = tool.annotations ?? {};
      check(
        hints.readOnlyHint === READ_ONLY.includes(tool.name),
        `${label}: ${tool.name} readOnlyHint ${hints.readOnlyHint}`
      );
      check(
        hints.destructiveHint === DESTRUCTIVE.includes(tool.name),
        `${label}: ${tool.name} destructiveHint ${hints.destructiveHint}`
      );
      if (tool.name === 'create_attachment_handoff') {
        check(hints.idempotentHint === true, `${label}: ${tool.name} idempotentHint`);
      }
    }
    check(!FORBIDDEN.some((name) => names.includes(name)), `${label}: a forbidden tool is listed`);

    const mailboxes = await client.callTool({ name: 'list_allowed_mailboxes', arguments: {} });
    check(
      JSON.stringify(mailboxes.structuredContent) === JSON.stringify({ mailboxes: ['test'] }),
      `${label}: list_allowed_mailboxes answered ${JSON.stringify(mailboxes.structuredContent)}`
    );

    // Resources and prompts are the same on every catalog; the policy view names this one.
    const { resources } = await client.listResources();
    check(
      resources.some((r) => r.uri === 'mailgate://test/folders'),
      `${label}: resources/list ${JSON.stringify(resources).slice(0, 300)}`
    );
    const policy = JSON.parse((await client.readResource({ uri: 'mailgate://policy' })).contents[0].text);
    check(
      JSON.stringify([...policy.tools].sort()) === JSON.stringify(names),
      `${label}: mailgate://policy lists ${policy.tools}`
    );
    const { prompts } = await client.listPrompts();
    check(prompts.length === 4, `${label}: prompts/list ${prompts.map((p) => p.name)}`);

    // Invalid arguments reach the model as a tool result naming the field, not an exception.
    const invalid = await client.callTool({
      name: 'search_mailbox',
      arguments: { mailbox: 'test', criteria: { maxResults: 101 } },
    });
    const invalidText = textOf(invalid);
    check(
      invalid.isError === true &&
        invalidText.startsWith('INVALID_ARGUMENT: ') &&
        invalidText.includes('criteria.maxResults') &&
        invalid._meta?.['mailgate/errorCode'] === 'INVALID_ARGUMENT',
      `${label}: invalid arguments answered ${JSON.stringify(invalid)}`
    );

    // A tool outside the catalog stays a protocol error; a gated one names its variable.
    if (!writes) {
      let message = '';
      try {
        await client.callTool({ name: 'create_draft', arguments: {} });
      } catch (error) {
        message = String(error?.message ?? error);
      }
      check(
        message.includes('it needs PLUGIN_ALLOW_WRITES=true'),
        `${label}: create_draft behind the closed gate answered "${message}"`
      );
    }
    process.stdout.write(`ok ${label}: ${names.length} tools\n`);
  } catch (error) {
    throw new Error(`${error.message}\nmailgate stderr:\n${serverStderr}`);
  } finally {
    await client.close();
  }
}

/** The send gate on but incomplete: mailgate must refuse to start and name the variable. */
function refusal(label, sendVars, variable) {
  const run = spawnSync(mailgate, ['serve'], {
    cwd: root,
    env: environment(false, false, true, sendVars),
    input: '',
    encoding: 'utf8',
    timeout: 20_000,
  });
  check(
    run.status !== 0 && run.stderr.includes('send gate') && run.stderr.includes(variable),
    `refusal "${label}": exit ${run.status}, stderr: ${run.stderr}`
  );
  process.stdout.write(`ok refusal: ${label}\n`);
}

try {
  for (let bits = 0; bits < 8; bits += 1) {
    await scenario(Boolean(bits & 1), Boolean(bits & 2), Boolean(bits & 4));
  }
  refusal('no sending mailbox', { OUTLOOK_ALLOWED_SENDERS: 'test@example.com' }, 'OUTLOOK_SEND_FROM');
  refusal('no outbound allowlist', { OUTLOOK_SEND_FROM: 'test@example.com' }, 'OUTLOOK_ALLOWED_SENDERS');
  refusal(
    'sending mailbox not in the plugin allowlist',
    { OUTLOOK_SEND_FROM: 'other@example.com', OUTLOOK_ALLOWED_SENDERS: 'other@example.com' },
    'OUTLOOK_SEND_FROM'
  );
  refusal(
    'sending mailbox not covered by the outbound allowlist',
    { OUTLOOK_SEND_FROM: 'test@example.com', OUTLOOK_ALLOWED_SENDERS: 'other@example.com' },
    'OUTLOOK_ALLOWED_SENDERS'
  );
  check(consoleLines.length === 0, `the SDK printed ${consoleLines.length} console line(s)`);
  process.stdout.write('sdk client: all checks passed\n');
} catch (error) {
  process.stdout.write(`FAILED: ${error.message}\n`);
  if (consoleLines.length > 0) {
    process.stdout.write(`(${consoleLines.length} console line(s), first: ${consoleLines[0]})\n`);
  }
  process.exitCode = 1;
} finally {
  rmSync(root, { recursive: true, force: true });
}
