//! Composes the one catalog a process serves from its gates.
//!
//! Invariant: a tool is in the catalog exactly when its family's gate is open; the read family
//! always is. The catalog is built once at startup and never changes. A tool that is not in the
//! catalog was never registered: it can be neither listed nor called (no `disable_route`).
//! It lives with the tools, not the gates, because it composes tool families: tools depend on
//! gates, gates know no tool (issue 10, clean layering).

use crate::gates::{Gate, Gates};
use crate::tools::{self, Family, ToolDef};

/// The tools of the catalog for `gates`, in family order (read, handoff, write, send).
pub(crate) fn build(gates: &Gates) -> Vec<&'static ToolDef> {
    compose(|gate| gates.is_open(gate))
}

/// The catalog `gates` would give with the send gate forced to `send` (policy export needs the
/// send catalogs without a configured sender).
pub(crate) fn build_for(gates: &Gates, send: bool) -> Vec<&'static ToolDef> {
    compose(|gate| {
        if gate == Gate::Send {
            send
        } else {
            gates.is_open(gate)
        }
    })
}

fn compose(is_open: impl Fn(Gate) -> bool) -> Vec<&'static ToolDef> {
    let mut out: Vec<&'static ToolDef> = tools::family(Family::Read).iter().collect();
    for family in [Family::Handoff, Family::Write, Family::Send] {
        let open = match family.gate() {
            // Exhaustive on purpose: a new gate must be wired here before anything compiles.
            Some(gate @ (Gate::Handoffs | Gate::Writes | Gate::Send)) => is_open(gate),
            None => true,
        };
        if open {
            out.extend(tools::family(family).iter());
        }
    }
    out
}

/// The stable name of a gate combination, used for the golden files in `policy/catalogs/`.
pub(crate) fn catalog_name(handoffs: bool, writes: bool, send: bool) -> String {
    let mut parts = vec!["read"];
    if handoffs {
        parts.push("handoffs");
    }
    if writes {
        parts.push("writes");
    }
    if send {
        parts.push("send");
    }
    parts.join("+")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gates::Gates;

    fn catalog(handoffs: bool, writes: bool, send: bool) -> Vec<&'static ToolDef> {
        let mut g = Gates::read_only();
        g.handoffs = handoffs;
        g.writes = writes;
        build_for(&g, send)
    }

    #[test]
    fn eight_catalogs_have_the_specified_counts() {
        let expected = [
            ((false, false, false), 12),
            ((true, false, false), 14),
            ((false, true, false), 17),
            ((true, true, false), 19),
            ((false, false, true), 13),
            ((true, false, true), 15),
            ((false, true, true), 18),
            ((true, true, true), 20),
        ];
        for ((h, w, s), count) in expected {
            let names: Vec<&str> = catalog(h, w, s).iter().map(|t| t.name).collect();
            assert_eq!(names.len(), count, "{}", catalog_name(h, w, s));
            let mut unique = names.clone();
            unique.sort();
            unique.dedup();
            assert_eq!(unique.len(), count, "duplicate tool names");
        }
    }

    #[test]
    fn no_delete_tool_exists_anywhere() {
        for t in tools::all_tools() {
            for banned in ["delete", "remove", "purge", "expunge", "reply", "forward"] {
                assert!(!t.name.contains(banned), "{} is forbidden", t.name);
            }
        }
        assert_eq!(tools::all_tools().count(), 20);
    }

    #[test]
    fn opening_a_gate_only_adds_tools() {
        for bits in 0..8u8 {
            let base = catalog(bits & 1 != 0, bits & 2 != 0, bits & 4 != 0);
            for extra in 0..3 {
                let more = bits | (1 << extra);
                let wider = catalog(more & 1 != 0, more & 2 != 0, more & 4 != 0);
                assert!(base.iter().all(|t| wider.iter().any(|w| w.name == t.name)));
            }
        }
    }
}
