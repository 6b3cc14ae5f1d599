// The twelve read tools every catalog serves, shared by the Node clients' checks.
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
