//! Policy: the reviewable rules that decide what may leave the gateway.
//!
//! Invariant: values here are parsed, never pattern-matched, and once built they cannot be
//! widened. [`address`] holds the address types that the config loader and the send gate use;
//! [`outbound`] is the one chokepoint for outgoing mail and the sole constructor of the send
//! permit every transport requires.
//!
//! Who may call it: config, gates and the tools; nothing here performs I/O.

pub(crate) mod address;
pub(crate) mod outbound;
