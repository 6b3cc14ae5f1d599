//! `cargo bench --bench handoff [ENTRIES]`: handoff-store timings (create at 1 KiB / 1 MiB /
//! 25 MiB, full revalidation, create and replay lookup at ENTRIES bundles, default 1000, and the
//! startup sweep). Prints a report; asserts nothing about speed.
#![allow(
    clippy::print_stdout,
    clippy::disallowed_methods,
    reason = "a bench binary prints its report and reads its argument"
)]

use std::os::unix::fs::PermissionsExt as _;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `cargo test --all-targets` runs this binary too, without `--bench`: there it is a smoke run
    // (a small store), so the test suite proves the bench works without paying minutes for it.
    let default_entries = if args.iter().any(|a| a == "--bench") {
        1000
    } else {
        20
    };
    let entries = args
        .iter()
        .find_map(|a| a.parse::<usize>().ok())
        .unwrap_or(default_entries);
    let scratch = tempfile::tempdir().expect("a scratch directory");
    // The store's parent must be private (tempdirs are created 0755 under umask 022).
    std::fs::set_permissions(scratch.path(), std::fs::Permissions::from_mode(0o700))
        .expect("chmod the scratch directory");
    match mailgate::__bench::handoff(scratch.path(), entries) {
        Ok(report) => print!("{report}"),
        Err(e) => panic!("the handoff bench failed: {e}"),
    }
}
