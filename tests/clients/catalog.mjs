// What the Node clients' checks share: the twelve read tools every catalog serves, and a
// console capture and two check helpers.
export const READ = [
  'list_allowed_mailboxes',
  'search_mailbox',
  'search_mailboxes',
  'search_mailboxes_batch',
  'get_message',
  'list_messages',
  'list_folders',
  'get_folder_stats',
  'list_attachments',
  'get_attachment_content',
  'inspect_attachment_evidence',
  'investigate_documents',
];

// Records (and still prints) every line a library writes through the console; the returned
// array grows as they come.
export function captureConsole() {
  const lines = [];
  for (const level of ['log', 'info', 'warn', 'error', 'debug']) {
    const original = console[level].bind(console);
    console[level] = (...args) => {
      lines.push(`console.${level}: ${args.map(String).join(' ')}`);
      original(...args);
    };
  }
  return lines;
}

export function check(condition, message) {
  if (!condition) {
    throw new Error(message);
  }
}

// The text blocks of a tool result, joined.
export function textOf(result) {
  return (result.content ?? [])
    .filter((block) => block.type === 'text')
    .map((block) => block.text)
    .join('\n');
}
