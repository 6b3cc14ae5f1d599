#!/usr/bin/env node
// The official TypeScript MCP SDK holding mailgate to issue 36's broken-MIME-shape rules: for
// every shape of tests/fixtures/mime-shapes/shapes.json, the message alone in folder `ShapeNN`
// of mailbox `shapes` (built by tests/it/real_clients.rs from the same corpus) is read and
// searched as the manifest says. The same checks as python_sdk_shapes_client.py:
//   * list_messages in its folder gives exactly one message;
//   * get_message on it: every `bodyContains` string is in `message.body` of the structured
//     content and in the text block (what a text-only client shows the model); the attachments'
//     content types are the manifest's `attachments`, where it names them;
//   * search_mailbox in its folder for `present`: FOUND, one hit, that message;
//   * search_mailbox in its folder for `absent`: status `absentStatus`, and `absentWarning` among
//     the warnings when the manifest gives one.
//
// Usage: node sdk-shapes-client.mjs /path/to/mailgate [/path/to/shapes.json]
// The environment points `mailgate serve` at that config (OUTLOOK_PLUGIN_CONFIG). Every check
// runs; prints "sdk shapes client: all checks passed", or exits 1 with the table of every
// disagreement.

import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { captureConsole, check, textOf } from './catalog.mjs';

const MAILBOX = 'shapes';
const here = dirname(fileURLToPath(import.meta.url));
const mailgate = process.argv[2] && resolve(process.argv[2]);
if (!mailgate || process.argv.length > 4) {
  process.stderr.write('usage: node sdk-shapes-client.mjs /path/to/mailgate [/path/to/shapes.json]\n');
  process.exit(2);
}
const manifest = process.argv[3] ?? resolve(here, '../fixtures/mime-shapes/shapes.json');
const { shapes } = JSON.parse(readFileSync(manifest, 'utf8'));
check(shapes.length >= 20, `the manifest lost shapes: ${shapes.length}`);

const consoleLines = captureConsole();
// Our own lines bypass the console, which counts only what libraries print.
const say = (line) => process.stdout.write(`${line}\n`);
const label = (shape) => shape.file.replace(/\.eml$/, '');

// Every check made; `finish` fails with all the disagreements at once.
let checked = 0;
const failed = [];
const record = (shape, what, ok, expected, got) => {
  checked += 1;
  if (!ok) failed.push([label(shape), what, expected, got]);
};
const finish = () => {
  if (failed.length === 0) return;
  const titles = ['shape', 'check', 'expected', 'got'];
  const widths = titles.map((t, i) => Math.max(t.length, ...failed.map((row) => row[i].length)));
  const line = (cells) => cells.map((c, i) => c.padEnd(widths[i])).join(' | ').trimEnd();
  const lines = [`${failed.length} of ${checked} checks disagree`, line(titles), ...failed.map(line)];
  lines.push('shapes that disagree:');
  for (const name of new Set(failed.map((row) => row[0]))) {
    lines.push(`  ${name}: ${shapes.find((s) => label(s) === name)?.shape ?? '?'}`);
  }
  say(`FAILED: ${lines.join('\n')}`);
  process.exit(1);
};

const client = new Client({ name: 'mailgate-shapes-check', version: '1.0.0' });
await client.connect(
  new StdioClientTransport({ command: mailgate, args: ['serve'], env: { ...process.env }, stderr: 'ignore' })
);

// [structured content, text block] of a successful call, or [null, why] of a tool error.
const call = async (name, args) => {
  const result = await client.callTool({ name, arguments: args });
  if (result.isError) return [null, `tool error: ${textOf(result).slice(0, 200)}`];
  if (!result.structuredContent) return [null, 'no structured content'];
  return [result.structuredContent, textOf(result)];
};
const warningsOf = (answer) => (answer.warnings ?? []).map((w) => (typeof w === 'string' ? w : JSON.stringify(w)));
// `STATUS [warnings] n=hits` of a search answer.
const describe = (answer, why) =>
  answer ? `${answer.status} [${warningsOf(answer).join(',')}] n=${(answer.messages ?? []).length}` : why;

const shapeChecks = async (shape, folder) => {
  const [listing, listWhy] = await call('list_messages', {
    mailbox: MAILBOX,
    criteria: { folder, maxResults: 5 },
  });
  const ids = listing ? listing.messages.map((m) => m.id) : [];
  record(shape, 'list_messages', ids.length === 1, 'one message', listing ? `n=${ids.length}` : listWhy);
  if (ids.length === 0) return;
  const messageId = ids[0];

  const [answer, text] = await call('get_message', { mailbox: MAILBOX, messageId });
  if (!answer) {
    record(shape, 'get_message', false, 'an answer', text);
  } else {
    const body = answer.message.body ?? '';
    for (const want of shape.bodyContains) {
      record(shape, `body has ${want}`, body.includes(want), 'contains it', JSON.stringify(body.slice(0, 160)));
      record(shape, `text block has ${want}`, text.includes(want), 'contains it', `${text.length} chars without it`);
    }
    if (shape.attachments !== null) {
      const got = (answer.message.attachments ?? []).map((a) => a.contentType ?? '?');
      record(shape, 'attachments', JSON.stringify(got) === JSON.stringify(shape.attachments),
        JSON.stringify(shape.attachments), JSON.stringify(got));
    }
  }

  const search = (query) => ({ mailbox: MAILBOX, criteria: { query, folder, maxResults: 10 } });
  const [present, presentWhy] = await call('search_mailbox', search(shape.present));
  const hits = present ? present.messages.map((m) => m.id) : [];
  record(shape, `search ${shape.present}`,
    present?.status === 'FOUND' && hits.length === 1 && hits[0] === messageId,
    'FOUND n=1 (the message)', describe(present, presentWhy));

  const [absent, absentWhy] = await call('search_mailbox', search(shape.absent));
  const warning = shape.absentWarning;
  record(shape, `search ${shape.absent}`,
    absent?.status === shape.absentStatus && (warning === null || warningsOf(absent).includes(warning)),
    warning ? `${shape.absentStatus} [${warning}]` : shape.absentStatus, describe(absent, absentWhy));
};

try {
  const tools = Object.fromEntries((await client.listTools()).tools.map((t) => [t.name, t]));
  // The argument names this client sends are the ones the tool schemas declare.
  const props = (name) => tools[name].inputSchema.properties;
  check('mailbox' in props('get_message') && 'messageId' in props('get_message'), 'get_message schema');
  check('mailbox' in props('list_folders'), 'list_folders schema');
  for (const name of ['search_mailbox', 'list_messages']) {
    const criteria = props(name).criteria.properties;
    check(['query', 'folder', 'maxResults'].every((k) => k in criteria), `${name} criteria: ${Object.keys(criteria)}`);
  }
  say('ok the schemas declare mailbox, messageId, criteria.query|folder|maxResults');

  // displayName -> id of every folder of the mailbox, across pages.
  const byName = new Map();
  let cursor;
  do {
    const [listing, why] = await call('list_folders', { mailbox: MAILBOX, ...(cursor ? { cursor } : {}) });
    check(listing, `list_folders: ${why}`);
    for (const f of listing.folders) byName.set(f.displayName, f.id);
    cursor = listing.nextCursor;
  } while (cursor);

  for (const shape of shapes) {
    const folder = byName.get(`Shape${shape.file.slice(0, 2)}`);
    record(shape, 'folder', folder !== undefined, 'its folder ShapeNN', 'missing');
    if (folder !== undefined) await shapeChecks(shape, folder);
  }
} finally {
  await client.close();
}
finish();
check(consoleLines.length === 0, `console output: ${consoleLines.join('; ')}`);
say(`ok ${shapes.length} shapes, ${checked} checks`);
say('sdk shapes client: all checks passed');
