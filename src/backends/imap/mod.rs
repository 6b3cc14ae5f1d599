//! The IMAP + SMTP backend (issue 12; in progress).
#![allow(dead_code, reason = "wired into the backend seam as issue 12 lands")]

pub(crate) mod mutf7;
pub(crate) mod query;
pub(crate) mod structure;
