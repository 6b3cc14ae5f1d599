//! The ids the IMAP backend hands out, and the only parsers of ids callers send back.
//!
//! A message id is `<uidvalidity>.<uid>.<folder id>`; a folder id is the folder's wire name
//! (modified UTF-7, so ASCII) in unpadded base64url. UIDs are only meaningful together with the
//! folder's UIDVALIDITY (RFC 3501 §2.3.1.1): an id whose UIDVALIDITY is no longer the folder's
//! names a message of an earlier incarnation of the folder, and is refused as outdated rather
//! than read as whatever message now has that UID. A decoded folder name must be a name the
//! protocol can carry as a quoted string (printable ASCII, bounded), so a forged id cannot put
//! anything but one quoted mailbox name on the wire.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::backends::BackendError;

/// Longest folder wire name accepted in an id.
const MAX_FOLDER_NAME: usize = 1_000;

/// A message: its folder's wire name, the folder's UIDVALIDITY when the id was issued, its UID.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MessageRef {
    pub(crate) folder: String,
    pub(crate) uid_validity: u32,
    pub(crate) uid: u32,
}

impl MessageRef {
    pub(crate) fn encode(&self) -> String {
        format!(
            "{}.{}.{}",
            self.uid_validity,
            self.uid,
            folder_id(&self.folder)
        )
    }

    /// Parses an id this backend issued; anything else is `BadId`.
    pub(crate) fn parse(id: &str) -> Result<Self, BackendError> {
        let mut parts = id.splitn(3, '.');
        let (Some(validity), Some(uid), Some(folder)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(BackendError::BadId);
        };
        let number = |s: &str| -> Result<u32, BackendError> {
            // Canonical decimal only, so one message has exactly one id.
            if s.is_empty()
                || s.len() > 10
                || s.starts_with('0')
                || !s.bytes().all(|b| b.is_ascii_digit())
            {
                return Err(BackendError::BadId);
            }
            s.parse::<u32>().map_err(|_| BackendError::BadId)
        };
        Ok(Self {
            uid_validity: number(validity)?,
            uid: number(uid)?,
            folder: folder_name(folder)?,
        })
    }
}

/// The id of the folder whose wire name is `wire`.
pub(crate) fn folder_id(wire: &str) -> String {
    URL_SAFE_NO_PAD.encode(wire.as_bytes())
}

/// The wire name inside a folder id; `BadId` unless it decodes to a name a quoted string can
/// carry.
pub(crate) fn folder_name(id: &str) -> Result<String, BackendError> {
    if id.is_empty() || id.len() > MAX_FOLDER_NAME * 4 / 3 + 4 {
        return Err(BackendError::BadId);
    }
    let bytes = URL_SAFE_NO_PAD
        .decode(id)
        .map_err(|_| BackendError::BadId)?;
    let name = String::from_utf8(bytes).map_err(|_| BackendError::BadId)?;
    if !is_wire_name(&name) || folder_id(&name) != id {
        return Err(BackendError::BadId);
    }
    Ok(name)
}

/// Whether `name` can be a mailbox name on the wire: printable ASCII, non-empty, bounded.
pub(crate) fn is_wire_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_FOLDER_NAME
        && name.bytes().all(|b| (0x20..0x7f).contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn message_ids_round_trip_and_refuse_anything_else() {
        let m = MessageRef {
            folder: "INBOX/Projects & \"Q3\"".to_owned(),
            uid_validity: 1_733_250_000,
            uid: 42,
        };
        let id = m.encode();
        assert!(id.starts_with("1733250000.42."), "{id}");
        assert_eq!(MessageRef::parse(&id).expect("own id"), m);
        for bad in [
            "",
            "1.2",
            "x.2.SU5CT1g",
            "1.02.SU5CT1g",
            "1.2.",
            "1.2.SU5CT1g=",
            "1.4294967296.SU5CT1g",
            "-1.2.SU5CT1g",
            // "IN\rBOX" and a non-ASCII name: valid base64, refused names.
            &format!("1.2.{}", URL_SAFE_NO_PAD.encode("IN\rBOX")),
            &format!("1.2.{}", URL_SAFE_NO_PAD.encode("Posteingang-ü")),
        ] {
            assert!(
                matches!(MessageRef::parse(bad), Err(BackendError::BadId)),
                "{bad:?}"
            );
        }
    }

    proptest! {
        #[test]
        fn any_id_a_caller_sends_is_refused_or_names_a_quotable_folder(id in "\\PC{0,80}") {
            if let Ok(m) = MessageRef::parse(&id) {
                prop_assert!(is_wire_name(&m.folder));
                prop_assert_eq!(m.encode(), id);
            }
        }

        #[test]
        fn issued_ids_parse_back(folder in "[ -~]{1,60}", v in 1u32.., uid in 1u32..) {
            let m = MessageRef { folder, uid_validity: v, uid };
            prop_assert_eq!(MessageRef::parse(&m.encode()).expect("own id"), m);
        }
    }
}
