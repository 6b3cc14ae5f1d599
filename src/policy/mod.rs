//! Policy: the reviewable rules that decide what may leave the gateway.
//!
//! Invariant: values here are parsed, never pattern-matched, and once built they cannot be
//! widened. Today this holds the address types ([`address`]) that the config loader and the send
//! gate use; the outbound decision module (`policy::outbound`, sole constructor of the send
//! permit) arrives with the send issue.
//!
//! Who may call it: config, gates and the tools; nothing here performs I/O.

pub(crate) mod address;
