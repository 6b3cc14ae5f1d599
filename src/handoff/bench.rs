//! Measurements of the handoff store for `cargo bench --bench handoff` (not a test: timings
//! depend on the machine). Reports create, replay lookup, revalidation and sweep costs at an
//! empty store and at a store holding `maxHandoffStoreEntries`-scale bundle counts, because
//! every create scans the committed manifests (quota accounting and the key lookup).
//!
//! Compiled only with the `bench` feature (test and bench builds, see Cargo.toml), so no
//! ordinary build carries it.
#![cfg(feature = "bench")]

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use super::{HandoffRequest, HandoffStore, StoreLimits};
use crate::alias::Alias;
use crate::downloads::SafeFileName;

const MIB: usize = 1024 * 1024;

fn request(n: usize) -> HandoffRequest {
    HandoffRequest::new(
        Alias::parse("bench").unwrap_or_else(|_| unreachable!("a valid alias")),
        "message",
        "att-0",
        &format!("0f8fad5b-d9cb-469f-a165-{n:012}"),
    )
}

fn time<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let started = Instant::now();
    let out = f();
    (out, started.elapsed())
}

/// Runs the measurements in `scratch` (a private, empty directory) and returns a report.
pub(crate) fn run(scratch: &Path, entries: usize) -> Result<String, String> {
    let root = crate::path_guard::open_private_subdir(scratch, "handoffs", true)
        .map_err(|e| e.to_string())?;
    let store = HandoffStore::new(
        root,
        StoreLimits {
            max_attachment_bytes: 100 * MIB as u64,
            max_store_bytes: 5 * 1024 * MIB as u64,
            max_entries: 10_000,
            ttl: Duration::from_secs(3600),
        },
        None,
    )
    .map_err(|e| e.to_string())?;
    let name = || SafeFileName::from_untrusted("bench.bin");
    let mut report = String::new();
    let mut next = 0usize;
    let mut create = |bytes: &[u8]| {
        next += 1;
        store
            .create(&request(next), name(), "application/octet-stream", bytes)
            .map_err(|e| e.to_string())
    };

    for size in [1024, MIB, 25 * MIB] {
        let bytes = vec![0x5a_u8; size];
        let (created, took) = time(|| create(&bytes));
        let id = created?.manifest.id;
        let (got, verify) = time(|| store.get(&id));
        got.map_err(|e| e.to_string())?;
        let _ = writeln!(
            report,
            "create {:>9} B into a near-empty store: {:>8.2} ms; full revalidation: {:>8.2} ms",
            size,
            took.as_secs_f64() * 1e3,
            verify.as_secs_f64() * 1e3
        );
    }
    let small = vec![1u8; 1024];
    let (filled, fill) = time(|| -> Result<(), String> {
        for _ in 3..entries {
            create(&small)?;
        }
        Ok(())
    });
    filled?;
    let _ = writeln!(
        report,
        "filled the store to {entries} bundles in {:.2} s ({:.2} ms per create on average)",
        fill.as_secs_f64(),
        fill.as_secs_f64() * 1e3 / entries.saturating_sub(3).max(1) as f64
    );
    let (created, took) = time(|| create(&small));
    created?;
    let _ = writeln!(
        report,
        "create 1 KiB at {} bundles: {:.2} ms",
        entries + 1,
        took.as_secs_f64() * 1e3
    );
    let (found, lookup) = time(|| store.find_by_key(&request(next)));
    found.map_err(|e| e.to_string())?;
    let _ = writeln!(
        report,
        "replay lookup by key at {} bundles: {:.2} ms",
        entries + 1,
        lookup.as_secs_f64() * 1e3
    );
    let (swept, sweep) = time(|| store.sweep());
    swept.map_err(|e| e.to_string())?;
    let _ = writeln!(
        report,
        "startup sweep over {} bundles: {:.2} ms",
        entries + 1,
        sweep.as_secs_f64() * 1e3
    );
    Ok(report)
}
