#!/usr/bin/env node
// The official TypeScript MCP SDK against a delegated alias (issue 37): a mailbox signed in with
// `mailgate auth login`, read over XOAUTH2 with the grant mailgate keeps. The same checks as
// python_sdk_delegated_client.py:
//   PHASE signed-in: list_messages in ALIAS finds SUBJECT.
//   PHASE revoked:   the grant was revoked at the provider: list_messages answers SEARCH_FAILED
//                    with backend_sign_in_required (never NOT_FOUND), and get_folder_stats is a
//                    tool error (isError) with the code AUTH_REQUIRED naming `mailgate auth
//                    login ALIAS`.
//
// Usage: node sdk-delegated-client.mjs /path/to/mailgate ALIAS signed-in|revoked SUBJECT
// The environment lets `mailgate serve` start on that configuration (tests/it/auth_login.rs).
// Prints "sdk delegated client: all checks passed", or exits 1 naming the failed check.

import { resolve } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { check, textOf } from './catalog.mjs';

const [, , exe, alias, phase, subject] = process.argv;
if (!exe || !alias || !['signed-in', 'revoked'].includes(phase) || subject === undefined) {
  process.stderr.write('usage: node sdk-delegated-client.mjs MAILGATE ALIAS signed-in|revoked SUBJECT\n');
  process.exit(2);
}

const client = new Client({ name: 'mailgate-delegated-check', version: '1.0.0' });
await client.connect(
  new StdioClientTransport({ command: resolve(exe), args: ['serve'], env: { ...process.env }, stderr: 'ignore' })
);
try {
  const listing = await client.callTool({ name: 'list_messages', arguments: { mailbox: alias, criteria: {} } });
  const body = listing.structuredContent ?? {};
  if (phase === 'signed-in') {
    check(!listing.isError, `list_messages: ${textOf(listing)}`);
    const subjects = (body.messages ?? []).map((m) => m.subject);
    check(subjects.includes(subject), `list_messages: ${JSON.stringify(subject)} not in ${JSON.stringify(subjects)}`);
    process.stdout.write(`ok list_messages: ${body.status}, ${subjects.length} message(s)\n`);
  } else {
    check(body.status === 'SEARCH_FAILED', `list_messages: ${JSON.stringify(body)}`);
    check((body.warnings ?? []).includes('backend_sign_in_required'), `warnings: ${JSON.stringify(body.warnings)}`);
    process.stdout.write('ok list_messages: SEARCH_FAILED, backend_sign_in_required\n');
    const stats = await client.callTool({ name: 'get_folder_stats', arguments: { mailbox: alias, folderId: 'inbox' } });
    check(stats.isError === true, `get_folder_stats: not an error: ${textOf(stats)}`);
    check(stats._meta?.['mailgate/errorCode'] === 'AUTH_REQUIRED', `get_folder_stats meta: ${JSON.stringify(stats._meta)}`);
    check(textOf(stats).includes(`mailgate auth login ${alias}`), `get_folder_stats text: ${textOf(stats)}`);
    process.stdout.write('ok get_folder_stats: AUTH_REQUIRED naming the command\n');
  }
} catch (failure) {
  process.stdout.write(`FAILED: ${failure.message}\n`);
  await client.close();
  process.exit(1);
}
await client.close();
process.stdout.write('sdk delegated client: all checks passed\n');
