//! Seeding the fake Graph: mailboxes, folders, fluent `Message` seeds, `.eml` files (one
//! message, or the demo corpus tree with its manifest flags) and synthetic paging fixtures.

use std::collections::HashMap;
use std::path::Path;

use super::{FakeGraph, Message};

impl FakeGraph {
    /// Adds a mailbox with the six well-known folders (idempotent).
    pub(crate) fn add_mailbox(&self, address: &str) {
        self.st().add_mailbox(address);
    }
    /// Sets the mailbox's master categories.
    pub(crate) fn set_categories(&self, address: &str, names: &[&str]) {
        let mut st = self.st();
        st.add_mailbox(address);
        let mb = st.mailboxes.get_mut(&address.to_lowercase()).unwrap();
        mb.categories = names.iter().map(|n| (*n).to_owned()).collect();
    }
    /// Adds an Outlook contact (also found by people search).
    pub(crate) fn add_contact(&self, address: &str, name: &str, contact: &str) {
        let mut st = self.st();
        st.add_mailbox(address);
        let mb = st.mailboxes.get_mut(&address.to_lowercase()).unwrap();
        mb.contacts.push((name.to_owned(), contact.to_owned()));
    }
    /// Creates (if needed) the folder path, e.g. `Inbox/Projects`; returns its id.
    pub(crate) fn add_folder(&self, address: &str, path: &str) -> String {
        self.st().ensure_folder(address, path)
    }
    /// Marks a folder hidden (`isHidden`; listed only with `includeHiddenFolders=true`).
    pub(crate) fn hide_folder(&self, address: &str, path: &str) {
        let mut st = self.st();
        let id = st.ensure_folder(address, path);
        let mb = st.mailboxes.get_mut(&address.to_lowercase()).unwrap();
        if let Some(f) = mb.folders.iter_mut().find(|f| f.id == id) {
            f.is_hidden = true;
        }
    }
    /// Files a seeded message in the folder path (created if needed); returns its id.
    pub(crate) fn add_message(&self, address: &str, path: &str, msg: Message) -> String {
        let mut st = self.st();
        let folder = st.ensure_folder(address, path);
        st.file(&address.to_lowercase(), &folder, msg)
    }
    /// Parses RFC 5322 bytes (subject, from, to, cc, date, text/html body, attachments as file
    /// attachments, attached messages as item attachments) and files the message; its id.
    pub(crate) fn seed_eml(&self, address: &str, path: &str, eml: &[u8]) -> String {
        let msg = Message::from_eml(eml).expect("seed .eml must parse");
        self.add_message(address, path, msg)
    }
    /// Seeds from a tree `<dir>/<alias>/<Maildir folder>/*.eml` (the demo corpus layout,
    /// `src/demo/messages`), one mailbox per `(alias, address)`. Maildir names map to Graph's
    /// (`INBOX` → Inbox, `Sent` → Sent Items, `Projects.Alpha` → Projects/Alpha); flags come
    /// from `<dir>/manifest.tsv` when present (`S` read, `F` flagged); `Drafts` are drafts.
    /// Returns how many messages were seeded.
    pub(crate) fn seed_from_eml_dir(&self, dir: &Path, aliases: &[(&str, &str)]) -> usize {
        let mut flags: HashMap<(String, String, String), String> = HashMap::new();
        if let Ok(manifest) = std::fs::read_to_string(dir.join("manifest.tsv")) {
            for line in manifest.lines() {
                let cols: Vec<&str> = line.split('\t').collect();
                if let [alias, folder, unique, f] = cols.as_slice() {
                    flags.insert(
                        ((*alias).into(), (*folder).into(), (*unique).into()),
                        (*f).into(),
                    );
                }
            }
        }
        let mut seeded = 0;
        for (alias, address) in aliases {
            self.add_mailbox(address);
            let Ok(folders) = std::fs::read_dir(dir.join(alias)) else {
                continue;
            };
            let mut folder_names: Vec<String> = folders
                .filter_map(Result::ok)
                .filter(|e| e.path().is_dir())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            folder_names.sort();
            for folder in folder_names {
                let graph_path = folder.replace('.', "/");
                let mut files: Vec<_> = std::fs::read_dir(dir.join(alias).join(&folder))
                    .expect("readable folder")
                    .filter_map(Result::ok)
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|e| e == "eml"))
                    .collect();
                files.sort();
                for file in files {
                    let bytes = std::fs::read(&file).expect("readable .eml");
                    let Some(mut msg) = Message::from_eml(&bytes) else {
                        continue;
                    };
                    let unique = file
                        .file_stem()
                        .map(|s| s.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    let f = flags
                        .get(&((*alias).into(), folder.clone(), unique))
                        .cloned()
                        .unwrap_or_default();
                    msg.is_read = f.contains('S');
                    msg.flagged = f.contains('F');
                    msg.is_draft = folder == "Drafts" || f.contains('D');
                    self.add_message(address, &graph_path, msg);
                    seeded += 1;
                }
            }
        }
        seeded
    }
    /// Files `n` synthetic messages (`Message::synthetic(0..n)`, hourly dates) in the folder;
    /// returns their ids in seeding order (oldest first).
    pub(crate) fn seed_synthetic(&self, address: &str, path: &str, n: usize) -> Vec<String> {
        (0..n)
            .map(|i| self.add_message(address, path, Message::synthetic(i)))
            .collect()
    }
}
