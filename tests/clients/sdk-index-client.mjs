#!/usr/bin/env node
// The official TypeScript MCP SDK reading index answers (issue 21): the `source` field in the
// schema, `source` per hit and `indexedThrough`, on a mailbox the test synced with
// `mailgate index sync`. The environment points `mailgate serve` at a config whose alias
// `finance` is indexed (set by tests/it/index.rs).
//
// Usage: node sdk-index-client.mjs /path/to/mailgate
// Prints one line per check; exits 1 at the first failed check.

import { resolve } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { captureConsole, check } from './catalog.mjs';

const mailgate = process.argv[2] && resolve(process.argv[2]);
if (!mailgate) {
  process.stderr.write('usage: node sdk-index-client.mjs /path/to/mailgate\n');
  process.exit(2);
}
const consoleLines = captureConsole();
// Our own lines bypass the console, which counts only what libraries print.
const say = (line) => process.stdout.write(`${line}\n`);

const client = new Client({ name: 'mailgate-index-check', version: '1.0.0' });
await client.connect(
  new StdioClientTransport({ command: mailgate, args: ['serve'], env: { ...process.env }, stderr: 'ignore' })
);
try {
  const { tools } = await client.listTools();
  const search = tools.find((t) => t.name === 'search_mailbox');
  const source = search.inputSchema.properties.criteria.properties.source;
  check(JSON.stringify(source.enum) === '["live","index","hybrid"]', `source enum: ${JSON.stringify(source)}`);
  say('ok the schema offers source live|index|hybrid');

  const call = async (src) => {
    const result = await client.callTool({
      name: 'search_mailbox',
      arguments: { mailbox: 'finance', criteria: { query: 'invoice', source: src, maxResults: 5 } },
    });
    check(!result.isError, `${src}: ${JSON.stringify(result.content)}`);
    return result.structuredContent;
  };
  const indexed = await call('index');
  check(indexed.strategy === 'index', `strategy ${indexed.strategy}`);
  check(typeof indexed.indexedThrough === 'string', 'indexedThrough is missing');
  check(indexed.messages.length > 0 && indexed.messages.every((m) => m.source === 'index'), 'index sources');
  say(`ok source index: ${indexed.messages.length} hits through ${indexed.indexedThrough}`);

  const hybrid = await call('hybrid');
  const sources = new Set(hybrid.messages.map((m) => m.source));
  check(hybrid.strategy === 'hybrid' && sources.has('both'), `hybrid sources ${[...sources]}`);
  check(new Set(hybrid.messages.map((m) => m.id)).size === hybrid.messages.length, 'hybrid hits are deduplicated');
  say(`ok source hybrid: ${[...sources].sort().join(', ')}`);

  const live = await call('live');
  check(!('indexedThrough' in live) && live.messages.every((m) => !('source' in m)), 'live carries no index fields');
  say('ok source live: the reference answer');
} finally {
  await client.close();
}
check(consoleLines.length === 0, `console output: ${consoleLines.join('; ')}`);
say('sdk index client: all checks passed');
