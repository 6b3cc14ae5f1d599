//! Modified UTF-7 mailbox names (RFC 3501 §5.1.3) (stub: lands with issue 12).

/// The display form of a wire mailbox name; `None` when it is not valid modified UTF-7.
pub(crate) fn decode(wire: &str) -> Option<String> {
    Some(wire.to_owned())
}

/// The wire form of a mailbox name.
pub(crate) fn encode(name: &str) -> String {
    name.to_owned()
}
