//! The local outbox: the transport of a Maildir sending mailbox without an `smtp` block, so the
//! demo (and any offline setup) can show a send end to end without a mail server. Nothing leaves
//! the machine: "sent" means delivered into the Maildir `<state folder>/outbox`.
//!
//! Invariants:
//! - The only module that writes to the outbox. The folder (with `tmp/ new/ cur/`) is created
//!   with mode 0700 at startup and opened through `path_guard`'s private-folder check (inside the
//!   checked state folder, never through a symlink, owned by this user, no group/other bits), and
//!   every later access is relative to that one `Dir`; a message file is created exclusively with mode 0600 under `tmp/`, synced, then
//!   renamed into `new/` (the Maildir delivery protocol), so a reader never sees a partial file.
//! - [`Outbox::deliver`] takes a [`SendPermit`] by value and writes exactly its bytes (which
//!   carry no `Bcc:` header). The file name is generated here, never taken from the message.
//!
//! Who may call it: startup opens it; the send tool hands it permits.

use std::io::{self, Write};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
use rand::RngExt;

use crate::outbound::{SendPermit, SentMessage};
use crate::path_guard::{self, PrivateDirError};

/// The outbox folder's name inside the state folder.
pub(crate) const OUTBOX_DIR: &str = "outbox";
/// The transport's name in receipts and logs.
pub(crate) const TRANSPORT: &str = OUTBOX_DIR;

/// The outbox Maildir, opened once.
pub(crate) struct Outbox {
    root: Arc<Dir>,
}

impl Outbox {
    /// Creates (if needed) and opens `outbox` in the checked state folder, with its
    /// `tmp/ new/ cur/` folders, all 0700. Existing folders are reused only when they pass the
    /// same private-folder check; a symlink or another user's folder is refused.
    pub(crate) fn open(state: &Dir) -> Result<Outbox, PrivateDirError> {
        let root = path_guard::open_private_child(state, OUTBOX_DIR, true)?;
        for sub in ["tmp", "new", "cur"] {
            path_guard::open_private_child(&root, sub, true)?;
        }
        Ok(Outbox {
            root: Arc::new(root),
        })
    }

    /// Delivers the permit's message into `new/`. On any failure no file is left behind.
    pub(crate) async fn deliver(&self, permit: SendPermit) -> io::Result<SentMessage> {
        let root = Arc::clone(&self.root);
        tokio::task::spawn_blocking(move || {
            write_message(&root, permit.bytes())?;
            Ok(permit.into_sent())
        })
        .await
        .map_err(|_| io::Error::other("outbox worker stopped"))?
    }
}

/// The Maildir delivery: `tmp/<unique>` (exclusive, 0600), fsync, rename to `new/<unique>`.
fn write_message(root: &Dir, bytes: &[u8]) -> io::Result<String> {
    let unique = unique_name();
    let tmp = format!("tmp/{unique}");
    let mut options = OpenOptions::new();
    options.write(true).create_new(true).mode(0o600);
    let written = root.open_with(&tmp, &options).and_then(|mut file| {
        file.write_all(bytes)?;
        file.sync_all()
    });
    let delivered = written.and_then(|()| root.rename(&tmp, root, format!("new/{unique}")));
    if let Err(error) = delivered {
        let _ = root.remove_file(&tmp);
        return Err(error);
    }
    Ok(unique)
}

/// `<seconds>.M<microseconds>P<pid>R<random>.mailgate`: Maildir's time-first unique name (the
/// reader sorts on the leading seconds), with 64 random bits instead of the host name.
fn unique_name() -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let random: [u8; 8] = rand::rng().random();
    format!(
        "{}.M{}P{}R{}.mailgate",
        now.as_secs(),
        now.subsec_micros(),
        std::process::id(),
        hex::encode(random)
    )
}

#[cfg(test)]
#[expect(
    clippy::disallowed_methods,
    reason = "the test checks the outbox folder's mode on the real filesystem"
)]
mod tests {
    use super::*;
    use crate::outbound::test_permit;
    use cap_std::fs::PermissionsExt as _;
    use std::os::unix::fs::PermissionsExt as _;

    #[tokio::test]
    async fn delivers_the_permits_bytes_into_new_with_private_modes() {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("state");
        let state_dir = path_guard::open_state_dir(&state, true).unwrap();
        let outbox = Outbox::open(&state_dir).unwrap();
        // Opening again reuses the folders.
        let outbox_again = Outbox::open(&state_dir).unwrap();
        let permit = test_permit(&["ana.lima@example.com"]);
        let expected = permit.bytes().to_vec();
        let sent = outbox.deliver(permit).await.unwrap();
        assert_eq!(sent.bytes, expected);
        assert!(String::from_utf8_lossy(&expected).contains(&sent.message_id));
        let _ = outbox_again
            .deliver(test_permit(&["ana.lima@example.com"]))
            .await
            .unwrap();

        let root = outbox.root.as_ref();
        let names: Vec<String> = root
            .read_dir("new")
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names.len(), 2);
        assert_eq!(
            root.read_dir("tmp").unwrap().count(),
            0,
            "nothing left in tmp/"
        );
        let first = names
            .iter()
            .find(|n| root.read(format!("new/{n}")).unwrap() == expected)
            .expect("the permit's bytes, unchanged");
        assert!(first.ends_with(".mailgate") && !first.contains('/'));
        let mode = |path: &str| root.metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&format!("new/{first}")), 0o600);
        for dir in ["tmp", "new", "cur"] {
            assert_eq!(mode(dir), 0o700, "{dir}");
        }
        let outbox_mode = std::fs::metadata(state.join(OUTBOX_DIR))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(outbox_mode & 0o777, 0o700);
    }

    #[test]
    fn a_failed_write_leaves_no_file() {
        let tmp = tempfile::tempdir().unwrap();
        let state = path_guard::open_state_dir(&tmp.path().join("state"), true).unwrap();
        let outbox = Outbox::open(&state).unwrap();
        // Make new/ unusable: the rename fails, and the tmp file must be cleaned up.
        outbox.root.remove_dir("new").unwrap();
        outbox.root.write("new", b"not a directory").unwrap();
        assert!(write_message(&outbox.root, b"Subject: x\r\n\r\nbody\r\n").is_err());
        assert_eq!(outbox.root.read_dir("tmp").unwrap().count(), 0);
    }

    #[test]
    fn unique_names_differ() {
        let a = unique_name();
        let b = unique_name();
        assert_ne!(a, b);
        assert!(a.split('.').next().unwrap().parse::<u64>().is_ok());
    }

    #[test]
    fn a_planted_symlink_never_receives_mail() {
        let tmp = tempfile::tempdir().unwrap();
        let state = tmp.path().join("state");
        let elsewhere = tempfile::tempdir().unwrap();
        let state_dir = path_guard::open_state_dir(&state, true).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), state.join(OUTBOX_DIR)).unwrap();
        assert_eq!(
            Outbox::open(&state_dir).err(),
            Some(PrivateDirError::NotADirectory)
        );
        // One level down too: a real outbox whose new/ points elsewhere.
        std::fs::remove_file(state.join(OUTBOX_DIR)).unwrap();
        std::fs::create_dir(state.join(OUTBOX_DIR)).unwrap();
        std::fs::set_permissions(
            state.join(OUTBOX_DIR),
            std::fs::Permissions::from_mode(0o700),
        )
        .unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), state.join("outbox/new")).unwrap();
        assert_eq!(
            Outbox::open(&state_dir).err(),
            Some(PrivateDirError::NotADirectory)
        );
        assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
    }
}
