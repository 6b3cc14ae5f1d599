//! mailgate-policy: the rules that decide what mailgate may read, write and send, as one small
//! crate to review. It holds the parsed address and alias types, `plugin.json` and environment
//! parsing ([`config`]), the three gates ([`gates`]), message composition ([`compose`]) and the
//! outbound chokepoint ([`outbound`]), the only constructor of the send permit every transport
//! requires, with the binding of a person's approval to one message ([`approval`]); plus the two
//! disk helpers config needs to read its own files ([`path_guard`], [`dir_fd`]). Nothing here
//! opens a network connection or starts a runtime: the crate's dependency closure has no tokio,
//! rmcp, rustls, aws-lc or SMTP transport, so its fuzz targets (`fuzz-policy/`) build without
//! them.
//!
//! Who may call it: the `mailgate` crate, which re-exports these modules at its root so its code
//! keeps saying `crate::config`, `crate::gates`, …; and the fuzz targets, through `fuzzing`
//! (compiled only under `cfg(fuzzing)`).
#![forbid(unsafe_code)]
#![expect(
    rustdoc::private_intra_doc_links,
    reason = "items are `pub` for the mailgate crate only; their docs are read with \
              --document-private-items, where links to the private helpers they name resolve"
)]

pub mod address;
pub mod alias;
pub mod approval;
pub mod caller;
pub mod compose;
pub mod config;
pub mod dir_fd;
pub mod gates;
pub mod json_tree;
pub mod outbound;
pub mod path_guard;

#[cfg(fuzzing)]
pub mod fuzzing;
#[cfg(test)]
mod read_back;
