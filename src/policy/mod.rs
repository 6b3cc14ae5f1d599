//! Policy: the reviewable rules that decide what may leave the gateway.
//!
//! The rules themselves live in the `mailgate-policy` crate (crates/mailgate-policy), together
//! with the address types, config and gates they are built from; this module re-exports the
//! outbound chokepoint so that callers keep saying `crate::policy::outbound`. [`outbound`] is the
//! one chokepoint for outgoing mail and the sole constructor of the send permit every transport
//! requires; the `compile_fail` doctests on `mailgate_policy::outbound::SendPermit` prove that no
//! other crate can build or clone one (`cargo test --workspace --doc`).
//!
//! Who may call it: startup and the tools; nothing here performs I/O.

pub(crate) use mailgate_policy::outbound;
