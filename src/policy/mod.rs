//! Policy: the reviewable rules that decide what may leave the gateway.
//!
//! Invariant: values here are parsed, never pattern-matched, and once built they cannot be
//! widened. The address types the config loader, the gates and MIME composition use live in
//! `crate::address` (a leaf, so those modules need not import policy; issue 10, clean layering);
//! [`outbound`] is the one chokepoint for outgoing mail and the sole constructor of the send
//! permit every transport requires.
//!
//! Who may call it: config, gates and the tools; nothing here performs I/O.

pub(crate) mod outbound;
