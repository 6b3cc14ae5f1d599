//! `cargo bench --bench extract [-- --smoke]`: what reading attachments in a worker process costs
//! (issue 13). Every attachment is parsed by `mailgate __extract-worker`, the binary re-executed
//! with an empty environment, one process per job (`src/extract/pool.rs`); this bench drives that
//! worker exactly as the server does (a JSON request line and the raw bytes on its stdin, one
//! reply on its stdout) and then the whole server over stdio, and prints three tables:
//!
//! 1. Start cost: a trivial text job (5 bytes) N times (`MAILGATE_EXTRACT_BENCH_SPAWNS`, default
//!    200; 10 in a smoke run), p50/p99 wall time per job, beside the same spawn of `/bin/true`
//!    (the process-start floor), `/bin/cat` with the same 5 bytes through the same pipes, and
//!    `mailgate --version` (loading the binary, no worker lock-down, no job).
//! 2. Throughput per format through the worker, input bytes / wall time including the start
//!    (median of `MAILGATE_EXTRACT_BENCH_ROUNDS`, default 5; 1), on inputs the bench generates
//!    (text, CSV, HTML, a many-page PDF, DOCX and XLSX written with the `zip` crate, a ZIP listed,
//!    read per entry and read whole as the evidence tools do) and on the demo fixtures as they
//!    are, each beside `cat` of the same bytes through a pipe, measured in the same run. Caps are
//!    set high (`max_chars` 1,000,000, the archive caps at their maximum) so the text formats
//!    are not cut early; what the worker answered (chars, truncated, or its error code) and its
//!    peak RSS (VmHWM, sampled while it runs) are printed beside each figure.
//! 3. A ZIP bomb (`MAILGATE_EXTRACT_BENCH_BOMB_MIB`, default 1024 MiB of zeros deflated; 4 MiB)
//!    in a Maildir message, `maxZipUncompressedBytes` at its maximum (200 MiB; 1 MiB in a smoke
//!    run), `get_attachment_content` with `entry` through `mailgate serve` over stdio: the
//!    server's VmRSS before, at most during (sampled every 10 ms) and after the call, the worker's
//!    peak (its VmHWM while alive, found through `/proc/<server>/task/*/children`), the answer
//!    code and the call's duration. Three archives: the bomb with its true sizes, the bomb with
//!    its declared uncompressed size forged to 1 KiB (so only counting while inflating can stop
//!    it), and one at 95% of the cap, which no cap refuses: the worker inflates all of it, the
//!    case that shows the server staying flat while a worker chews.
//!
//! Nothing about speed is asserted; the bench fails only when a process cannot start or the
//! server does not answer. Extractor errors (formats whose extractor is not in the build yet)
//! are reported as such. `MAILGATE_BENCH_EXE=PATH` measures another build; a smoke run is
//! `--smoke`, `MAILGATE_BENCH_SMOKE=1` or a run without `--bench` (a few seconds).
#![expect(clippy::print_stdout, reason = "a bench binary prints its report")]
#![expect(
    clippy::disallowed_methods,
    reason = "a bench binary reads its knobs, writes its scratch files and starts processes; the \
              library's rules are for the library"
)]

mod common;

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use common::exe;

/// The worker subcommand (`src/extract/worker.rs`).
const WORKER: &str = "__extract-worker";
/// The most `maxZipUncompressedBytes` allows (`crates/mailgate-policy/src/config/limits.rs`).
const MAX_ZIP_UNCOMPRESSED: u64 = 200 << 20;

struct Knobs {
    smoke: bool,
    spawns: usize,
    rounds: usize,
    /// Bytes of the generated text, CSV and HTML inputs.
    text_bytes: usize,
    /// Pages of the generated PDF.
    pdf_pages: usize,
    /// Paragraphs of the generated DOCX, rows of the generated XLSX.
    docx_paragraphs: usize,
    xlsx_rows: usize,
    bomb_bytes: u64,
    /// `maxZipUncompressedBytes` of the server in part 3.
    zip_cap: u64,
}

fn knobs() -> Knobs {
    let smoke = common::smoke();
    let knob = |name: &str, full: usize, quick: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(if smoke { quick } else { full })
    };
    Knobs {
        smoke,
        spawns: knob("MAILGATE_EXTRACT_BENCH_SPAWNS", 200, 10).max(2),
        rounds: knob("MAILGATE_EXTRACT_BENCH_ROUNDS", 5, 1).max(1),
        text_bytes: if smoke { 1 << 20 } else { 10 << 20 },
        pdf_pages: if smoke { 10 } else { 200 },
        docx_paragraphs: if smoke { 2_000 } else { 40_000 },
        xlsx_rows: if smoke { 1_000 } else { 20_000 },
        bomb_bytes: knob("MAILGATE_EXTRACT_BENCH_BOMB_MIB", 1024, 4) as u64 * (1 << 20),
        zip_cap: if smoke { 1 << 20 } else { MAX_ZIP_UNCOMPRESSED },
    }
}

fn main() {
    let knobs = knobs();
    let scratch = tempfile::tempdir().expect("a scratch directory");
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(scratch.path(), std::fs::Permissions::from_mode(0o700))
            .expect("chmod the scratch directory");
    }
    println!(
        "extract: the extraction worker ({} {WORKER}){}",
        exe(),
        if knobs.smoke { ", smoke run" } else { "" }
    );
    start_cost(&knobs);
    throughput(&knobs);
    bomb(&knobs, scratch.path());
}

// ---------------------------------------------------------------------------------------------
// Driving one process

/// The caps of every job of parts 1 and 2: text not cut early, archive caps at their maximum.
fn caps() -> Value {
    json!({
        "max_chars": 1_000_000,
        "max_zip_entries": 1_000,
        "max_zip_uncompressed_bytes": MAX_ZIP_UNCOMPRESSED,
        "max_container_entries": 20_000,
        "max_container_uncompressed_bytes": 500u64 << 20,
    })
}

/// What one run of a process gave back.
struct Run {
    wall: Duration,
    /// The worker's reply summarised (`text 1000000 chars, truncated`, `error ZIP_TOO_LARGE`),
    /// or how the process ended without one.
    outcome: String,
    /// The process's VmHWM, last seen while it ran (kB), when sampled.
    peak_kb: Option<u64>,
}

/// Starts `program args` as the server starts the worker (empty environment, stdin and stdout
/// piped, stderr on /dev/null), writes `input`, reads stdout to its end and reaps it.
fn run(program: &str, args: &[&str], input: &[u8], sample: bool) -> Run {
    let started = Instant::now();
    let mut child = Command::new(program)
        .args(args)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {program}: {e}"));
    let sampler = sample.then(|| Sampler::start(child.id()));
    let mut stdin = child.stdin.take().expect("invariant: stdin is piped");
    let mut stdout = child.stdout.take().expect("invariant: stdout is piped");
    // Written from another thread: `cat` answers while it reads, and a worker that stops early
    // must not leave us blocked on a full pipe.
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        // A process that ends early closes the pipe; what it wrote says why.
        let _ = stdin.write_all(&input);
    });
    let mut out = Vec::new();
    let _ = stdout.read_to_end(&mut out);
    let _ = writer.join();
    let status = child.wait().expect("reap the child");
    let wall = started.elapsed();
    let peak_kb = sampler.and_then(Sampler::stop);
    Run {
        wall,
        outcome: summarise(&out, status),
        peak_kb,
    }
}

/// A worker job: the request line, then the bytes.
fn worker_job(job: &Value, bytes: &[u8], sample: bool) -> Run {
    let mut input = json!({"job": job, "caps": caps(), "len": bytes.len()})
        .to_string()
        .into_bytes();
    input.push(b'\n');
    input.extend_from_slice(bytes);
    run(exe(), &[WORKER], &input, sample)
}

/// The reply line, summarised; the exit status when there is none.
fn summarise(out: &[u8], status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt as _;
    let line = out.split(|&b| b == b'\n').next().unwrap_or_default();
    let Ok(reply) = serde_json::from_slice::<Value>(line) else {
        return match (status.code(), status.signal()) {
            (_, Some(signal)) => format!("no reply, killed by signal {signal}"),
            (Some(code), _) => format!("no reply, exit {code}"),
            _ => "no reply".to_owned(),
        };
    };
    if let Some(text) = reply.get("text") {
        let chars = text["text"].as_str().map_or(0, |t| t.chars().count());
        format!(
            "{} {chars} chars{}{}",
            text["extractor"].as_str().unwrap_or("?"),
            if text["truncated"] == true {
                ", truncated"
            } else {
                ""
            },
            match text["unread_parts"].as_u64() {
                Some(n) if n > 0 => format!(", {n} unread"),
                _ => String::new(),
            }
        )
    } else if let Some(listing) = reply.get("listing") {
        format!(
            "listing {} entries, {} hidden",
            listing["entries"].as_array().map_or(0, Vec::len),
            listing["hiddenEntries"]
        )
    } else if let Some(raw) = reply.get("raw") {
        format!("raw {} bytes", raw["len"])
    } else if let Some(error) = reply.get("error") {
        format!("error {}", error_code(error))
    } else {
        format!("reply {reply}")
    }
}

/// The tool error code of a worker's `ExtractError` as serde writes it (`"Failed"`,
/// `{"Zip":"TooLarge"}`, `{"Unsupported":"pdf"}`).
fn error_code(error: &Value) -> String {
    let (variant, inner) = match error {
        Value::String(s) => (s.as_str(), None),
        Value::Object(map) => match map.iter().next() {
            Some((k, v)) => (k.as_str(), v.as_str()),
            None => ("?", None),
        },
        _ => ("?", None),
    };
    match (variant, inner) {
        ("Unsupported", Some(format)) => format!("UNSUPPORTED_FORMAT ({format})"),
        ("Failed", _) => "EXTRACTION_FAILED".to_owned(),
        ("Encrypted", _) => "ENCRYPTED".to_owned(),
        ("Zip", Some(zip)) => format!("ZIP_{}", screaming(zip)),
        _ => error.to_string(),
    }
}

/// `TooLarge` → `TOO_LARGE`.
fn screaming(camel: &str) -> String {
    let mut out = String::new();
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// Polls a process's VmHWM every 2 ms until stopped; the last value seen is its peak (a zombie
/// has no memory fields, so the value from just before it exited stays).
struct Sampler {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    thread: std::thread::JoinHandle<()>,
}

impl Sampler {
    fn start(pid: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(0));
        let thread = {
            let (stop, peak) = (Arc::clone(&stop), Arc::clone(&peak));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Some(kb) = common::proc_status_kb(pid, "VmHWM") {
                        peak.fetch_max(kb, Ordering::Relaxed);
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
            })
        };
        Self { stop, peak, thread }
    }

    fn stop(self) -> Option<u64> {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.join();
        Some(self.peak.load(Ordering::Relaxed)).filter(|&kb| kb > 0)
    }
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    sorted
        .get((sorted.len() * p / 100).min(sorted.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default()
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn size(bytes: u64) -> String {
    if bytes >= 1 << 20 {
        format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
    } else if bytes >= 1 << 10 {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    } else {
        format!("{bytes} B")
    }
}

fn mb_kb(kb: Option<u64>) -> String {
    kb.map_or_else(
        || "-".to_owned(),
        |kb| format!("{:.1} MB", kb as f64 / 1024.0),
    )
}

// ---------------------------------------------------------------------------------------------
// 1. Start cost

fn start_cost(knobs: &Knobs) {
    let n = knobs.spawns;
    let trivial = json!({"kind": "text", "name": "note.txt", "content_type": "text/plain"});
    let series = |label: &str, f: &dyn Fn() -> Run| {
        // One warm-up run (page cache, the binary's first mapping), then the timed ones.
        let first = f();
        let mut walls: Vec<Duration> = Vec::with_capacity(n);
        let mut outcome = first.outcome;
        for _ in 0..n {
            let r = f();
            walls.push(r.wall);
            outcome = r.outcome;
        }
        walls.sort();
        (label.to_owned(), walls, outcome)
    };
    let rows = [
        series("worker, 5-byte text job", &|| {
            worker_job(&trivial, b"hello", false)
        }),
        series("/bin/true (process-start floor)", &|| {
            run("/bin/true", &[], b"", false)
        }),
        series("/bin/cat, the same 5 bytes", &|| {
            run("/bin/cat", &[], b"hello", false)
        }),
        series("mailgate --version (load only)", &|| {
            run(exe(), &["--version"], b"", false)
        }),
    ];
    println!("\n1. start cost: {n} runs each after one warm-up, one at a time (wall per run)");
    println!(
        "  {:<34} {:>10} {:>10} {:>10}  last outcome",
        "", "p50", "p99", "max"
    );
    for (label, walls, outcome) in &rows {
        println!(
            "  {label:<34} {:>10} {:>10} {:>10}  {outcome}",
            ms(percentile(walls, 50)),
            ms(percentile(walls, 99)),
            ms(percentile(walls, 100)),
        );
    }
    let p50 = |i: usize| percentile(&rows[i].1, 50).as_secs_f64() * 1e3;
    println!(
        "  worker above the process floor: {:.2} ms at p50 ({:.2} ms above mailgate --version: \
         the lock-down, the request and the job)",
        p50(0) - p50(1),
        p50(0) - p50(3)
    );
}

// ---------------------------------------------------------------------------------------------
// 2. Throughput

/// One input of the throughput table.
struct Input {
    label: String,
    job: Value,
    bytes: Vec<u8>,
    /// What the bytes hold beyond their size (a container's inflated XML).
    note: String,
}

fn text_job(name: &str, content_type: &str) -> Value {
    json!({"kind": "text", "name": name, "content_type": content_type})
}

fn throughput(knobs: &Knobs) {
    let t = Instant::now();
    let inputs = inputs(knobs);
    println!(
        "\n2. throughput through the worker (inputs generated in {:.1} s): input bytes / wall \
         time including the process start, median of {} run(s); anchor: cat of the same bytes \
         through a pipe, in the same run",
        t.elapsed().as_secs_f64(),
        knobs.rounds
    );
    println!(
        "  {:<30} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}  answer",
        "input", "size", "worker", "MB/s", "cat", "cat MB/s", "peak RSS"
    );
    for input in &inputs {
        let mut worker: Vec<Run> = (0..knobs.rounds)
            .map(|_| worker_job(&input.job, &input.bytes, true))
            .collect();
        let mut cat: Vec<Duration> = (0..knobs.rounds)
            .map(|_| run("/bin/cat", &[], &input.bytes, false).wall)
            .collect();
        worker.sort_by_key(|r| r.wall);
        cat.sort();
        let median = &worker[worker.len() / 2];
        // Sampled every 2 ms: a run of a few milliseconds may end before a sample lands.
        let peak = worker
            .iter()
            .filter(|r| r.wall >= Duration::from_millis(10))
            .filter_map(|r| r.peak_kb)
            .max();
        let cat = cat[cat.len() / 2];
        let rate = |d: Duration| input.bytes.len() as f64 / 1e6 / d.as_secs_f64().max(1e-9);
        println!(
            "  {:<30} {:>10} {:>10} {:>10.1} {:>10} {:>10.1} {:>10}  {}{}",
            input.label,
            size(input.bytes.len() as u64),
            ms(median.wall),
            rate(median.wall),
            ms(cat),
            rate(cat),
            mb_kb(peak),
            median.outcome,
            if input.note.is_empty() {
                String::new()
            } else {
                format!(" [{}]", input.note)
            }
        );
    }
}

fn inputs(knobs: &Knobs) -> Vec<Input> {
    let mut inputs = Vec::new();
    let n = knobs.text_bytes;
    inputs.push(Input {
        label: "text (generated)".into(),
        job: text_job("notes.txt", "text/plain"),
        bytes: prose(n),
        note: "plain text decodes at most 4 bytes per char of max_chars".into(),
    });
    inputs.push(Input {
        label: "CSV (generated)".into(),
        job: text_job("ledger.csv", "text/csv"),
        bytes: csv(n),
        note: String::new(),
    });
    inputs.push(Input {
        label: "HTML (generated)".into(),
        job: text_job("page.html", "text/html"),
        bytes: html(n),
        note: "HTML reads its first 4 MiB".into(),
    });
    let pdf = pdf(knobs.pdf_pages);
    inputs.push(Input {
        label: format!("PDF ({} pages, generated)", knobs.pdf_pages),
        job: text_job("report.pdf", "application/pdf"),
        bytes: pdf,
        note: String::new(),
    });
    let (docx, docx_xml) = docx(knobs.docx_paragraphs);
    inputs.push(Input {
        label: format!("DOCX ({} paragraphs)", knobs.docx_paragraphs),
        job: text_job(
            "letter.docx",
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        ),
        bytes: docx,
        note: format!("document.xml {}", size(docx_xml as u64)),
    });
    let (xlsx, xlsx_xml) = xlsx(knobs.xlsx_rows);
    inputs.push(Input {
        label: format!("XLSX ({} rows × 6)", knobs.xlsx_rows),
        job: text_job(
            "ledger.xlsx",
            "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        ),
        bytes: xlsx,
        note: format!("sheet1.xml {}", size(xlsx_xml as u64)),
    });
    let (archive, inflated) = archive(n);
    inputs.push(Input {
        label: "ZIP listing (101 entries)".into(),
        job: json!({"kind": "zipList"}),
        bytes: archive.clone(),
        note: format!("inflated {}", size(inflated as u64)),
    });
    inputs.push(Input {
        label: "ZIP entry big.txt (text)".into(),
        job: json!({"kind": "zipEntry", "entry": "big.txt", "password": null, "raw_cap": null}),
        bytes: archive.clone(),
        note: format!("entry {}", size((n / 2) as u64)),
    });
    inputs.push(Input {
        label: "ZIP whole (archiveText)".into(),
        job: json!({"kind": "archiveText"}),
        bytes: archive,
        note: "the evidence tools' read".into(),
    });
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/demo/fixtures");
    for (file, content_type) in [
        ("invoice-INV-2026-0042.pdf", "application/pdf"),
        (
            "cover-note-PROP-2042.docx",
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        ),
        (
            "premium-schedule-2026.xlsx",
            "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        ),
        ("claims-bundle-2026-Q2.zip", "application/zip"),
    ] {
        let Ok(bytes) = std::fs::read(fixtures.join(file)) else {
            println!("  (demo fixture {file} not found, skipped)");
            continue;
        };
        let job = if file.ends_with(".zip") {
            json!({"kind": "zipList"})
        } else {
            text_job(file, content_type)
        };
        inputs.push(Input {
            label: format!("demo {}", file.rsplit('.').next().unwrap_or(file)),
            job,
            bytes,
            note: file.to_owned(),
        });
    }
    inputs
}

/// Deterministic words for the generated inputs.
struct Words(u64);

impl Words {
    const LIST: [&'static str; 24] = [
        "invoice",
        "policy",
        "premium",
        "renewal",
        "claim",
        "broker",
        "schedule",
        "insured",
        "payment",
        "reference",
        "quarter",
        "summary",
        "approved",
        "pending",
        "cover",
        "annual",
        "liability",
        "property",
        "marine",
        "deductible",
        "endorsement",
        "statement",
        "ledger",
        "reconciliation",
    ];

    fn next(&mut self) -> &'static str {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        Self::LIST[(self.0 % Self::LIST.len() as u64) as usize]
    }

    fn number(&mut self) -> u64 {
        self.next();
        self.0 % 100_000
    }

    /// A sentence of `n` words.
    fn sentence(&mut self, n: usize) -> String {
        let mut s = String::new();
        for i in 0..n {
            if i > 0 {
                s.push(' ');
            }
            s.push_str(self.next());
        }
        s
    }
}

fn prose(n: usize) -> Vec<u8> {
    let mut w = Words(0x2545_f491_4f6c_dd1d);
    let mut out = String::with_capacity(n + 128);
    while out.len() < n {
        out.push_str(&w.sentence(12));
        out.push_str(".\n");
    }
    out.into_bytes()
}

fn csv(n: usize) -> Vec<u8> {
    let mut w = Words(0x9e37_79b9_7f4a_7c15);
    let mut out = String::from("id,date,party,amount,status,memo\n");
    let mut i = 0u64;
    while out.len() < n {
        i += 1;
        out.push_str(&format!(
            "INV-{i:07},2026-{:02}-{:02},{},{}.{:02},{},\"{}\"\n",
            i % 12 + 1,
            i % 28 + 1,
            w.next(),
            w.number(),
            i % 100,
            w.next(),
            w.sentence(5)
        ));
    }
    out.into_bytes()
}

fn html(n: usize) -> Vec<u8> {
    let mut w = Words(0xd1b5_4a32_d192_ed03);
    let mut out = String::from(
        "<!DOCTYPE html>\n<html><head><title>Statement</title><style>td{padding:2px}</style>\
         </head><body>\n",
    );
    while out.len() < n {
        out.push_str(&format!(
            "<div class=\"item\"><h3>{}</h3><p>{} <b>{}</b> <a href=\"https://example.com/{}\">{}\
             </a></p><table><tr><td>{}</td><td>{}</td></tr></table></div>\n",
            w.sentence(3),
            w.sentence(10),
            w.next(),
            w.number(),
            w.next(),
            w.number(),
            w.sentence(2)
        ));
    }
    out.push_str("</body></html>\n");
    out.into_bytes()
}

/// A PDF of `pages` pages of 50 lines each in Helvetica, uncompressed content streams, with a
/// correct cross-reference table.
fn pdf(pages: usize) -> Vec<u8> {
    let mut w = Words(0x1234_5678_9abc_def1);
    let mut out: Vec<u8> = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n".to_vec();
    // Objects: 1 catalog, 2 pages, 3 font, then per page i: 4 + 2i page, 5 + 2i contents.
    let total = 3 + 2 * pages;
    let mut offsets = vec![0usize; total + 1];
    let mut object = |out: &mut Vec<u8>, id: usize, body: &[u8]| {
        offsets[id] = out.len();
        out.extend_from_slice(format!("{id} 0 obj\n").as_bytes());
        out.extend_from_slice(body);
        out.extend_from_slice(b"\nendobj\n");
    };
    object(&mut out, 1, b"<< /Type /Catalog /Pages 2 0 R >>");
    let kids: Vec<String> = (0..pages).map(|i| format!("{} 0 R", 4 + 2 * i)).collect();
    object(
        &mut out,
        2,
        format!(
            "<< /Type /Pages /Kids [{}] /Count {pages} >>",
            kids.join(" ")
        )
        .as_bytes(),
    );
    object(
        &mut out,
        3,
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    );
    for i in 0..pages {
        object(
            &mut out,
            4 + 2 * i,
            format!(
                "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << \
                 /F1 3 0 R >> >> /Contents {} 0 R >>",
                5 + 2 * i
            )
            .as_bytes(),
        );
        let mut stream = String::from("BT /F1 10 Tf 12 TL 50 760 Td\n");
        for line in 0..50 {
            stream.push_str(&format!(
                "(Page {} line {line}: {}) '\n",
                i + 1,
                w.sentence(9)
            ));
        }
        stream.push_str("ET");
        object(
            &mut out,
            5 + 2 * i,
            format!(
                "<< /Length {} >>\nstream\n{stream}\nendstream",
                stream.len()
            )
            .as_bytes(),
        );
    }
    let xref = out.len();
    out.extend_from_slice(format!("xref\n0 {}\n0000000000 65535 f \n", total + 1).as_bytes());
    for offset in &offsets[1..] {
        out.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            total + 1
        )
        .as_bytes(),
    );
    out
}

/// A ZIP of `(name, bytes)` files, deflated.
fn zip_of(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (name, bytes) in files {
        out.start_file(*name, options).expect("start a zip entry");
        out.write_all(bytes).expect("write a zip entry");
    }
    out.finish().expect("finish the zip").into_inner()
}

const CONTENT_TYPES_DOCX: &str = r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/></Types>"#;
const RELS_DOCX: &str = r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/></Relationships>"#;

/// A minimal DOCX of `paragraphs` paragraphs; its bytes and the size of its document XML.
fn docx(paragraphs: usize) -> (Vec<u8>, usize) {
    let mut w = Words(0x0bad_cafe_f00d_beef);
    let mut xml = String::from(
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>"#,
    );
    for i in 0..paragraphs {
        xml.push_str(&format!(
            "<w:p><w:r><w:t xml:space=\"preserve\">{i}. {} </w:t></w:r><w:r><w:rPr><w:b/>\
             </w:rPr><w:t>{}</w:t></w:r></w:p>",
            w.sentence(10),
            w.next()
        ));
    }
    xml.push_str("<w:sectPr/></w:body></w:document>");
    let bytes = zip_of(&[
        ("[Content_Types].xml", CONTENT_TYPES_DOCX.as_bytes()),
        ("_rels/.rels", RELS_DOCX.as_bytes()),
        ("word/document.xml", xml.as_bytes()),
    ]);
    (bytes, xml.len())
}

const CONTENT_TYPES_XLSX: &str = r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/><Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/><Override PartName="/xl/worksheets/sheet1.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/></Types>"#;
const RELS_XLSX: &str = r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="xl/workbook.xml"/></Relationships>"#;
const WORKBOOK: &str = r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><sheets><sheet name="Ledger" sheetId="1" r:id="rId1"/></sheets></workbook>"#;
const WORKBOOK_RELS: &str = r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" Target="worksheets/sheet1.xml"/></Relationships>"#;

/// A minimal XLSX of one sheet, `rows` rows of six cells (inline strings and numbers); its bytes
/// and the size of its sheet XML.
fn xlsx(rows: usize) -> (Vec<u8>, usize) {
    let mut w = Words(0x5151_7a7a_3c3c_9d9d);
    let mut xml = String::from(
        r#"<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>"#,
    );
    for r in 1..=rows {
        let s = |col: char, text: &str| {
            format!("<c r=\"{col}{r}\" t=\"inlineStr\"><is><t>{text}</t></is></c>")
        };
        let n = |col: char, v: u64| format!("<c r=\"{col}{r}\"><v>{v}</v></c>");
        xml.push_str(&format!(
            "<row r=\"{r}\">{}{}{}{}{}{}</row>",
            s('A', &format!("PROP-{r:06}")),
            s('B', w.next()),
            s('C', &w.sentence(3)),
            n('D', w.number()),
            n('E', w.number()),
            s('F', w.next())
        ));
    }
    xml.push_str("</sheetData></worksheet>");
    let bytes = zip_of(&[
        ("[Content_Types].xml", CONTENT_TYPES_XLSX.as_bytes()),
        ("_rels/.rels", RELS_XLSX.as_bytes()),
        ("xl/workbook.xml", WORKBOOK.as_bytes()),
        ("xl/_rels/workbook.xml.rels", WORKBOOK_RELS.as_bytes()),
        ("xl/worksheets/sheet1.xml", xml.as_bytes()),
    ]);
    (bytes, xml.len())
}

/// A ZIP of 100 small text files and `big.txt` (half of `n`); its bytes and its inflated size.
fn archive(n: usize) -> (Vec<u8>, usize) {
    let small: Vec<(String, Vec<u8>)> = (0..100)
        .map(|i| (format!("claims/note-{i:03}.txt"), prose(n / 200)))
        .collect();
    let big = prose(n / 2);
    let mut files: Vec<(&str, &[u8])> = small
        .iter()
        .map(|(name, bytes)| (name.as_str(), bytes.as_slice()))
        .collect();
    files.push(("big.txt", &big));
    let inflated = files.iter().map(|(_, b)| b.len()).sum();
    (zip_of(&files), inflated)
}

// ---------------------------------------------------------------------------------------------
// 3. The bomb, through the server

fn bomb(knobs: &Knobs, scratch: &Path) {
    let t = Instant::now();
    let honest = zip_bomb(knobs.bomb_bytes);
    let built = t.elapsed();
    let mut forged = honest.clone();
    let forged_ok = forge_uncompressed_size(&mut forged, 1024);
    println!(
        "\n3. a ZIP bomb through `mailgate serve`: {} of zeros deflated to {} (built in {:.1} s), \
         maxZipUncompressedBytes {}, get_attachment_content with entry",
        size(knobs.bomb_bytes),
        size(honest.len() as u64),
        built.as_secs_f64(),
        size(knobs.zip_cap)
    );

    let maildir = scratch.join("mail/personal");
    for sub in ["cur", "new", "tmp"] {
        std::fs::create_dir_all(maildir.join(sub)).expect("create the Maildir");
    }
    deliver(
        &maildir,
        1,
        &with_attachment("honest-bomb", "zeros.zip", &honest),
    );
    if forged_ok {
        deliver(
            &maildir,
            2,
            &with_attachment("forged-bomb", "zeros.zip", &forged),
        );
    }
    drop((honest, forged));
    // An archive just under the cap: the caps cannot refuse it, so the worker inflates all of
    // it. This is the case that shows the server's memory staying flat while a worker chews.
    let near_cap = zip_bomb(knobs.zip_cap / 100 * 95);
    deliver(
        &maildir,
        3,
        &with_attachment("near-cap", "zeros.zip", &near_cap),
    );
    drop(near_cap);
    let config = scratch.join("plugin.json");
    let json = json!({
        "mailboxes": [{
            "alias": "personal",
            "address": "personal@example.com",
            "access": "full",
            "backend": {"kind": "maildir", "path": maildir},
        }],
        "maxZipUncompressedBytes": knobs.zip_cap,
    });
    std::fs::write(&config, json.to_string()).expect("write plugin.json");
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600))
            .expect("chmod plugin.json");
    }
    let mut server = Server::start(scratch, &config);
    server.handshake();

    println!(
        "  {:<52} {:>10} {:>10} {:>10} {:>10} {:>11}  answer",
        "call (server VmRSS; the worker's VmHWM)",
        "duration",
        "before",
        "max during",
        "after",
        "worker peak"
    );
    let mut cases = vec![("honest-bomb", "sizes as written")];
    if forged_ok {
        cases.push(("forged-bomb", "declared size forged to 1 KiB"));
    } else {
        println!("  (could not forge the declared size: the archive's layout was unexpected)");
    }
    cases.push(("near-cap", "95% of the cap, inflated in full"));
    for (subject, what) in cases {
        let Some((message, attachment)) = server.attachment_of(subject) else {
            println!("  {subject}: message or attachment not found");
            continue;
        };
        let base = json!({"mailbox": "personal", "messageId": message, "attachmentId": attachment});
        let mut with_entry = base.clone();
        with_entry["entry"] = json!("zeros.txt");
        for (label, args) in [
            (format!("{subject}: listing"), base),
            (format!("{subject}: entry ({what})"), with_entry),
        ] {
            let c = server.call("get_attachment_content", args);
            println!(
                "  {label:<52} {:>10} {:>10} {:>10} {:>10} {:>11}  {}",
                ms(c.wall),
                mb_kb(c.rss_before),
                mb_kb(c.rss_max),
                mb_kb(c.rss_after),
                mb_kb(c.worker_peak),
                c.answer
            );
        }
    }
    std::thread::sleep(Duration::from_millis(if knobs.smoke { 0 } else { 1000 }));
    println!(
        "  server after the calls{}: VmRSS {}, VmHWM (its peak over its whole life) {}",
        if knobs.smoke { "" } else { " and 1 s idle" },
        mb_kb(server.status("VmRSS")),
        mb_kb(server.status("VmHWM"))
    );
    server.stop();
}

/// A ZIP with one entry, `zeros.txt`, of `bytes` zeros, deflated in 1 MiB writes (nothing of
/// that size is held in memory).
fn zip_bomb(bytes: u64) -> Vec<u8> {
    let mut out = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .large_file(bytes >= u64::from(u32::MAX));
    out.start_file("zeros.txt", options)
        .expect("start the bomb");
    let chunk = vec![0u8; 1 << 20];
    let mut left = bytes;
    while left > 0 {
        let k = left.min(chunk.len() as u64) as usize;
        out.write_all(&chunk[..k]).expect("write the bomb");
        left -= k as u64;
    }
    out.finish().expect("finish the bomb").into_inner()
}

/// Sets the one entry's declared uncompressed size (local header and central directory) to
/// `size`, as a hostile sender would; false when the archive is not the simple single-entry
/// layout this expects (then it is left alone).
fn forge_uncompressed_size(zip: &mut [u8], size: u32) -> bool {
    let le32 = |b: &[u8], at: usize| {
        b.get(at..at + 4)
            .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    };
    // End of central directory: the last 22 bytes when there is no comment.
    let Some(eocd) = zip.len().checked_sub(22) else {
        return false;
    };
    if le32(zip, eocd) != Some(0x0605_4b50) || le32(zip, 0) != Some(0x0403_4b50) {
        return false;
    }
    let Some(cd) = le32(zip, eocd + 16).map(|o| o as usize) else {
        return false;
    };
    if le32(zip, cd) != Some(0x0201_4b50) {
        return false;
    }
    // A zip64 entry keeps its sizes in an extra field: not this simple layout.
    if le32(zip, 22) == Some(u32::MAX) || le32(zip, cd + 24) == Some(u32::MAX) {
        return false;
    }
    zip[22..26].copy_from_slice(&size.to_le_bytes());
    zip[cd + 24..cd + 28].copy_from_slice(&size.to_le_bytes());
    true
}

/// A message from a fictional sender with one attachment, base64 in 76-column lines.
fn with_attachment(subject: &str, name: &str, bytes: &[u8]) -> Vec<u8> {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
    let mut body = format!(
        "From: mallory@example.org\r\nTo: personal@example.com\r\nSubject: {subject}\r\n\
         Date: Mon, 02 Mar 2026 09:00:00 +0000\r\nMessage-ID: <{subject}@example.org>\r\n\
         MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=B\r\n\r\n--B\r\n\
         Content-Type: text/plain\r\n\r\nsee attached\r\n--B\r\n\
         Content-Type: application/zip; name=\"{name}\"\r\n\
         Content-Disposition: attachment; filename=\"{name}\"\r\n\
         Content-Transfer-Encoding: base64\r\n\r\n"
    );
    for chunk in b64.as_bytes().chunks(76) {
        body.push_str(std::str::from_utf8(chunk).expect("invariant: base64 is ASCII"));
        body.push_str("\r\n");
    }
    body.push_str("--B--\r\n");
    body.into_bytes()
}

fn deliver(maildir: &Path, n: u32, raw: &[u8]) {
    let name = format!("{}.M{n}P1.bench", 1_900_000_000 + n);
    std::fs::write(maildir.join("new").join(name), raw).expect("deliver a message");
}

/// One measured tool call.
struct Call {
    wall: Duration,
    answer: String,
    rss_before: Option<u64>,
    rss_max: Option<u64>,
    rss_after: Option<u64>,
    worker_peak: Option<u64>,
}

/// `mailgate serve` over stdio with raw JSON-RPC lines (as benches/load.rs drives it).
struct Server {
    child: Child,
    stdin: Option<std::process::ChildStdin>,
    lines: mpsc::Receiver<Value>,
    stderr_path: PathBuf,
    next_id: u64,
}

impl Server {
    fn start(home: &Path, config: &Path) -> Self {
        let stderr_path = home.join("serve.stderr");
        let stderr = std::fs::File::create(&stderr_path).expect("create the stderr file");
        let mut child = common::mailgate(home, &["serve".as_ref()])
            .env("OUTLOOK_PLUGIN_CONFIG", config)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {} serve: {e}", exe()));
        let stdout = child.stdout.take().expect("invariant: stdout is piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let Ok(value) = serde_json::from_str(&line) else {
                    continue;
                };
                if tx.send(value).is_err() {
                    break;
                }
            }
        });
        Self {
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

    /// Waits for the answer to `id`, calling `tick` about every 10 ms meanwhile.
    fn answer(&mut self, id: u64, mut tick: impl FnMut()) -> Value {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            tick();
            match self.lines.recv_timeout(Duration::from_millis(10)) {
                Ok(msg) if msg["id"] == id => return msg,
                Ok(_) | Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < deadline => {}
                _ => {
                    print_tail(&self.stderr_path);
                    panic!("no answer to request {id} from the server");
                }
            }
        }
    }

    fn handshake(&mut self) {
        self.send(&common::initialize(
            0,
            "mailgate-extract-bench",
            "2025-06-18",
        ));
        let answer = self.answer(0, || {});
        if answer.get("result").is_none() {
            print_tail(&self.stderr_path);
            panic!("initialize was refused: {answer}");
        }
        self.send(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
    }

    fn call_raw(&mut self, name: &str, args: Value, tick: impl FnMut()) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({
            "jsonrpc": "2.0",
            "id": id,
            "method": "tools/call",
            "params": { "name": name, "arguments": args },
        }));
        self.answer(id, tick)
    }

    /// The message id and first attachment id of the message with `subject`.
    fn attachment_of(&mut self, subject: &str) -> Option<(String, String)> {
        let list = self.call_raw(
            "list_messages",
            json!({"mailbox": "personal", "criteria": {"subject": subject}}),
            || {},
        );
        let message = list["result"]["structuredContent"]["messages"][0]["id"]
            .as_str()?
            .to_owned();
        let atts = self.call_raw(
            "list_attachments",
            json!({"mailbox": "personal", "messageId": message}),
            || {},
        );
        let attachment = atts["result"]["structuredContent"]["attachments"][0]["id"]
            .as_str()?
            .to_owned();
        Some((message, attachment))
    }

    /// A call with the server's VmRSS sampled every ~10 ms and the worker's VmHWM read while it
    /// is alive.
    fn call(&mut self, name: &str, args: Value) -> Call {
        let pid = self.child.id();
        let rss_before = self.status("VmRSS");
        let mut rss_max = rss_before;
        let mut worker_peak: Option<u64> = None;
        let started = Instant::now();
        let msg = self.call_raw(name, args, || {
            if let Some(kb) = common::proc_status_kb(pid, "VmRSS") {
                rss_max = Some(rss_max.map_or(kb, |m| m.max(kb)));
            }
            for child in children(pid) {
                if let Some(kb) = common::proc_status_kb(child, "VmHWM") {
                    worker_peak = Some(worker_peak.map_or(kb, |m| m.max(kb)));
                }
            }
        });
        let wall = started.elapsed();
        let rss_after = self.status("VmRSS");
        let result = &msg["result"];
        let answer = if let Some(error) = msg.get("error") {
            format!("JSON-RPC error {}", error["message"])
        } else if result["isError"] == true {
            result["_meta"]["mailgate/errorCode"]
                .as_str()
                .map_or_else(|| format!("error {result}"), str::to_owned)
        } else {
            let out = &result["structuredContent"];
            match out["kind"].as_str() {
                Some("zip_listing") => format!(
                    "zip_listing, {} entries",
                    out["zipEntries"].as_array().map_or(0, Vec::len)
                ),
                Some(kind) => format!(
                    "{kind}, {} chars{}",
                    out["text"].as_str().map_or(0, |t| t.chars().count()),
                    if out["truncated"] == true {
                        ", truncated"
                    } else {
                        ""
                    }
                ),
                None => "answer without kind".to_owned(),
            }
        };
        Call {
            wall,
            answer,
            rss_before,
            rss_max,
            rss_after,
            worker_peak,
        }
    }

    fn status(&self, field: &str) -> Option<u64> {
        common::proc_status_kb(self.child.id(), field)
    }

    /// Closes stdin and reaps the server, killing it if it lingers.
    fn stop(mut self) {
        drop(self.stdin.take());
        common::reap(&mut self.child);
    }
}

/// The child processes of `pid` (of any of its threads).
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for task in tasks.flatten() {
        if let Ok(list) = std::fs::read_to_string(task.path().join("children")) {
            out.extend(
                list.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    out
}

fn print_tail(path: &Path) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    println!("server stderr (last 20 lines):");
    for line in &lines[lines.len().saturating_sub(20)..] {
        println!("  {line}");
    }
}
