//! The shared store answers as the local one (test builds only): one generated mailbox written
//! to tantivy and to PostgreSQL, then every kind of question asked of both. What decides a
//! verdict must be equal: how many messages match, how many the scope holds, the content gaps,
//! the candidates of an investigation. Rankings must be equal too (BM25 with the same boosts and
//! constants over the same tokens; the corpus keeps fields short enough that tantivy stores
//! their lengths exactly, but for a few long logs ([`long_logs`]) whose bodies hold more
//! distinct tokens than a `tsvector` does, so the shared store keeps them in chunk rows: their
//! body lengths are equal, so tantivy's rounding of them ties them alike). The nearest-passage
//! searches of both stores' vectors (int8 rows on
//! one side, pgvector's HNSW over `halfvec` on the other) are held to an exact scan of the same
//! vectors: the same messages, in the same order, within what each store's rounding allows.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::read::PgRead;
use super::rows::{self, MessageRow};
use super::write::PgWrite;
use crate::backends::model::{
    AttachmentMeta, ContentGap, Filters, MessageSummary, Order, SortBy, SortOrder,
};
use crate::index::state::StateBatch;
use crate::index::store::Opened;
use crate::index::tantivy_index::TantivyIndex;
use crate::index::{
    CandidateQuery, Clue, IndexHits, IndexQuery, IndexedMessage, TextIndex as _,
    TextIndexWriter as _,
};
use crate::mime::Mailbox;

const MAILBOX: &str = "sha256:parity";

/// A small deterministic generator (xorshift): the same corpus on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    /// A word, the first ones far more often (as words are).
    fn word(&mut self) -> &'static str {
        let i = self.below(WORDS.len());
        WORDS[self.below(i + 1)]
    }

    fn words(&mut self, n: usize) -> String {
        (0..n).map(|_| self.word()).collect::<Vec<_>>().join(" ")
    }
}

const WORDS: [&str; 32] = [
    "report",
    "meeting",
    "budget",
    "invoice",
    "project",
    "review",
    "quarter",
    "lunch",
    "contract",
    "draft",
    "schedule",
    "travel",
    "PROP-1001",
    "prop1001",
    "Q1",
    "2024q1",
    "kick-off",
    "Überweisung",
    "straße",
    "東京都",
    "naïve",
    "e-mail",
    "follow-up",
    "deadline",
    "vendor",
    "ledger",
    "audit",
    "payroll",
    "roadmap",
    "offsite",
    "zephyr",
    "quokka",
];

const PEOPLE: [(&str, &str); 6] = [
    ("Ana Lima", "ana.lima@example.com"),
    ("Bo Chen", "bo.chen@example.org"),
    ("Cleo Duarte", "cleo@example.com"),
    ("Dmitri Ivanov", "d.ivanov@example.org"),
    ("Eve Okafor", "eve.okafor@example.com"),
    ("Finance Team", "finance@example.com"),
];

fn at(hours: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(1_767_000_000 + hours * 3600, 0).expect("a date")
}

fn corpus(n: usize) -> Vec<IndexedMessage> {
    let mut rng = Rng(0x6d61_696c_6761_7465);
    (0..n)
        .map(|i| {
            let folder = if rng.chance(70) { "inbox" } else { "archive" };
            let mut summary = MessageSummary::blank(&format!("m{i}"), folder);
            let nsubject = 1 + rng.below(5);
            summary.subject = (!rng.chance(3)).then(|| rng.words(nsubject));
            let (name, address) = PEOPLE[rng.below(PEOPLE.len())];
            summary.from = Some(Mailbox {
                name: Some(name.to_owned()),
                address: Some(address.to_owned()),
            });
            summary.received = Some(at(i64::try_from(i).expect("small")));
            summary.is_read = rng.chance(50);
            for a in 0..rng.below(3) {
                let nname = 1 + rng.below(2);
                summary.attachments.push(AttachmentMeta {
                    id: format!("a{a}"),
                    name: Some(format!("{}.pdf", rng.words(nname).replace(' ', "-"))),
                    content_type: "application/pdf".to_owned(),
                    size: 1000,
                    size_is_estimate: false,
                    is_inline: false,
                });
            }
            summary.has_attachments = !summary.attachments.is_empty();
            summary.gap = rng.chance(5).then_some(ContentGap::TooLarge);
            let nbody = 3 + rng.below(18);
            let body = rng.words(nbody);
            summary.preview = body.chars().take(40).collect();
            let recipients = (0..1 + rng.below(2))
                .map(|_| PEOPLE[rng.below(PEOPLE.len())].1.to_owned())
                .collect();
            let natt = if summary.has_attachments {
                rng.below(10)
            } else {
                0
            };
            IndexedMessage {
                internet_message_id: Some(format!("<m{i}@example.com>")),
                thread_ids: Vec::new(),
                recipients,
                body,
                attachment_text: rng.words(natt),
                attachments_whole: !rng.chance(5),
                summary,
            }
        })
        .collect()
}

/// How many distinct ids a long log's body holds: about 1.8 MB of lexemes, two `tsvector`s'
/// worth and more.
const LOG_IDS: usize = 120_000;

/// The words of long log `j` beside its ids, each once: the ids (`u{j}n…`) sort after every
/// word before `u` and before every word after it, so `review`, `report`, `quokka` and `42` are
/// in the row's lexemes and `zephyr`, `zulu`, `zzchunkonly` and `東京都`'s characters and pairs
/// in a chunk only. Every log's body is as long ([`LOG_EXTRAS`] words beside its ids), padded
/// with a word of its own.
fn log_words(j: usize) -> Vec<String> {
    let mut words: Vec<String> = ["review", "report", "quokka", "zephyr", "東京都"]
        .map(str::to_owned)
        .into();
    // Log `j` holds the chunk-only word `j + 1` times: the logs rank by it.
    words.extend(std::iter::repeat_n("zzchunkonly".to_owned(), j + 1));
    // `zulu` (a chunk) with `42` (the row) in log 0 only: a spelling split between the two.
    match j {
        0 => words.extend(["zulu".to_owned(), "42".to_owned()]),
        1 => words.push("zulu".to_owned()),
        _ => words.push("42".to_owned()),
    }
    while words.len() < LOG_EXTRAS {
        words.push(format!("u{j}pad"));
    }
    words
}

/// The words beside its ids in every long log's body (`東京都` is one, of five tokens).
const LOG_EXTRAS: usize = 16;

/// The long logs: message `long{j}` of the inbox, the archive for `j` = 1, after the corpus.
fn long_logs() -> Vec<IndexedMessage> {
    (0..3)
        .map(|j| {
            let folder = if j == 1 { "archive" } else { "inbox" };
            let mut summary = MessageSummary::blank(&format!("long{j}"), folder);
            summary.subject = Some(format!("nightly log {j}"));
            summary.from = Some(Mailbox {
                name: Some("Build Robot".to_owned()),
                address: Some("robot@example.net".to_owned()),
            });
            summary.received = Some(at(500 + i64::try_from(j).expect("small")));
            let mut body = String::with_capacity(LOG_IDS * 11);
            for k in 0..LOG_IDS {
                body.push_str(&format!("u{j}n{k:06}"));
                body.push(if k % 8 == 7 { '\n' } else { ' ' });
            }
            body.push_str(&log_words(j).join(" "));
            summary.preview = body.chars().take(40).collect();
            IndexedMessage {
                internet_message_id: Some(format!("<long{j}@example.net>")),
                thread_ids: Vec::new(),
                recipients: vec!["ops@example.org".to_owned()],
                body,
                attachment_text: String::new(),
                attachments_whole: true,
                summary,
            }
        })
        .collect()
}

fn query(words: &[&str], folder: Option<&str>) -> IndexQuery {
    IndexQuery {
        folder_id: folder.map(str::to_owned),
        words: words.iter().map(|w| (*w).to_owned()).collect(),
        filters: Filters::default(),
        limit: 10,
        order: None,
    }
}

fn queries() -> Vec<IndexQuery> {
    let mut out = Vec::new();
    for w in WORDS {
        out.push(query(&[w], None));
        out.push(query(&[w], Some("inbox")));
    }
    for pair in [
        ["report", "budget"],
        ["meeting", "lunch"],
        ["prop", "1001"],
        ["ana", "invoice"],
        ["example", "quarter"],
        ["tokyo", "report"],
        ["ueberweisung", "strasse"],
        ["e", "mail"],
    ] {
        out.push(query(&pair, None));
        out.push(query(&pair, Some("archive")));
    }
    // The long logs' words: in a chunk only (alone, with a word of their row, with a word of
    // other messages' rows), in the row, an id in each.
    for words in [
        &["zzchunkonly"][..],
        &["zulu"],
        &["zulu", "42"],
        &["zulu", "quokka"],
        &["zephyr", "report"],
        &["u1n000123"],
        &["u1n119999"],
        &["u0n100000", "nightly"],
    ] {
        out.push(query(words, None));
        out.push(query(words, Some("inbox")));
    }
    out.push(IndexQuery {
        limit: 1000,
        ..query(&["zephyr"], None)
    });
    // Words no message holds, and a query of no indexable word.
    out.push(query(&["xylophone"], None));
    out.push(query(&["--"], Some("inbox")));
    let filtered = |f: Filters| IndexQuery {
        filters: f,
        ..query(&["report"], None)
    };
    out.push(filtered(Filters {
        sender: Some("LIMA".to_owned()),
        ..Filters::default()
    }));
    out.push(filtered(Filters {
        subject: Some("budget".to_owned()),
        ..Filters::default()
    }));
    out.push(filtered(Filters {
        date_from: Some(at(50)),
        date_to: Some(at(150)),
        ..Filters::default()
    }));
    out.push(filtered(Filters {
        has_attachments: Some(true),
        is_read: Some(false),
        ..Filters::default()
    }));
    for (by, direction) in [
        (SortBy::ReceivedDateTime, SortOrder::Desc),
        (SortBy::ReceivedDateTime, SortOrder::Asc),
        (SortBy::Subject, SortOrder::Asc),
        (SortBy::Subject, SortOrder::Desc),
    ] {
        for words in [&[][..], &["meeting"][..]] {
            out.push(IndexQuery {
                order: Some(Order { by, direction }),
                limit: 25,
                ..query(words, Some("inbox"))
            });
        }
    }
    // Every match, not only the best ten.
    out.push(IndexQuery {
        limit: 1000,
        ..query(&["review"], None)
    });
    out
}

fn candidate_queries() -> Vec<CandidateQuery> {
    let clues = [
        vec![Clue::Text("PROP-1001".to_owned())],
        vec![Clue::Text("prop 1001".to_owned())],
        vec![Clue::Text("2024 Q1".to_owned())],
        vec![Clue::Text("kick off".to_owned())],
        vec![Clue::Text("東京".to_owned())],
        vec![Clue::AttachmentName("report".to_owned())],
        vec![Clue::Gap],
        vec![Clue::UnreadAttachments],
        vec![Clue::Text("!!!".to_owned())],
        vec![Clue::Text("zephyr".to_owned()), Clue::Gap],
        // The long logs': a spelling split between a row and a chunk, in a chunk only, an id.
        vec![Clue::Text("zulu 42".to_owned())],
        vec![Clue::Text("42 zulu".to_owned())],
        vec![Clue::Text("zzchunkonly".to_owned())],
        vec![Clue::Text("u1n119999".to_owned())],
        vec![Clue::Text("zulu-quokka".to_owned()), Clue::Gap],
    ];
    clues
        .into_iter()
        .flat_map(|c| {
            ["inbox", "archive"].map(|folder| CandidateQuery {
                folder_id: folder.to_owned(),
                clues: c.clone(),
                limit: 500,
            })
        })
        .collect()
}

/// What must be equal: the counts, the gaps, the hits in order (by id), and, for ordered
/// listings, the order's key (subjects may tie, and ties are in no promised order).
fn assert_same(what: &str, ordered_by_subject: bool, local: &IndexHits, shared: &IndexHits) {
    assert_eq!(local.matched, shared.matched, "{what}: matched");
    assert_eq!(local.in_scope, shared.in_scope, "{what}: in scope");
    assert_eq!(local.gaps, shared.gaps, "{what}: gaps");
    let key = |h: &IndexHits| -> Vec<String> {
        h.hits
            .iter()
            .map(|(m, _)| {
                if ordered_by_subject {
                    m.subject.clone().unwrap_or_default().to_lowercase()
                } else {
                    m.id.clone()
                }
            })
            .collect()
    };
    assert_eq!(
        key(local),
        key(shared),
        "{what}: hits\n local:  {:?}\n shared: {:?}",
        local
            .hits
            .iter()
            .map(|(m, s)| (&m.id, s))
            .collect::<Vec<_>>(),
        shared
            .hits
            .iter()
            .map(|(m, s)| (&m.id, s))
            .collect::<Vec<_>>()
    );
}

async fn compare(local: &TantivyIndex, shared: &PgRead, round: &str) {
    for q in queries() {
        let what = format!(
            "{round}: {:?} in {:?} by {:?}",
            q.words, q.folder_id, q.order
        );
        let by_subject = q.order.is_some_and(|o| o.by == SortBy::Subject);
        let a = local.search(&q).expect("local search");
        let b = shared.search(&q).await.expect("shared search");
        assert_same(&what, by_subject, &a, &b);
    }
    for q in candidate_queries() {
        let what = format!("{round}: candidates {:?} in {}", q.clues, q.folder_id);
        let a = local.candidates(&q).expect("local candidates");
        let b = shared.candidates(&q).await.expect("shared candidates");
        assert_same(&what, false, &a, &b);
    }
    for id in ["m0", "m7", "long0", "nope"] {
        let a = local.summary(id).expect("local summary");
        let b = shared.summary(id).await.expect("shared summary");
        assert_eq!(
            a.map(|s| (s.id, s.subject, s.gap)),
            b.map(|s| (s.id, s.subject, s.gap)),
            "{round}: summary of {id}"
        );
    }
}

#[tokio::test]
async fn the_shared_store_counts_and_ranks_as_the_local_one() {
    let Some((settings, admin)) =
        super::testdb::fresh_settings("parity", Duration::from_secs(60)).await
    else {
        return;
    };
    let mut messages = corpus(400);
    let mut logs = long_logs();
    let (_tmp, local) = crate::index::tantivy_index::tests::index();
    let mut local_writer = local.writer().expect("writer");
    let Opened::Ready(mut shared_writer) =
        PgWrite::open(&settings, MAILBOX, None).await.expect("open")
    else {
        panic!("a fresh mailbox opens ready");
    };
    for m in messages.iter().chain(&logs) {
        local_writer.put(m).expect("put");
        shared_writer.put(m).expect("put");
    }
    // The long logs are what this test says they are: in chunks, whole, their words where
    // the queries expect them.
    for (j, log) in logs.iter().enumerate() {
        let row = MessageRow::of(log).expect("a row");
        assert!(row.body_chunks.len() >= 2, "log {j}: two chunks and more");
        assert_eq!(row.gap, 0, "log {j} is held whole");
        assert_eq!(
            row.field_lengths[rows::BODY],
            i32::try_from(LOG_IDS + LOG_EXTRAS + 4).expect("small"),
            "log {j}: the logs' bodies are equally long"
        );
        let in_row = |w: &str| row.lexemes[rows::BODY].contains(&format!("'{w}'"));
        let in_chunk = |w: &str| {
            row.body_chunks
                .iter()
                .any(|c| c.contains(&format!("'{w}'")))
        };
        for w in ["review", "quokka", "u1n000123", "42"] {
            assert!(!in_chunk(w), "log {j}: {w} is in no chunk");
        }
        for w in ["zephyr", "zzchunkonly", "東京", "u1n119999"] {
            assert!(!in_row(w), "log {j}: {w} is not in the row");
        }
        assert!(in_row("review") && in_chunk("zzchunkonly") && in_chunk("zephyr"));
    }
    local_writer.commit().expect("commit");
    let batch = StateBatch {
        folder: "inbox".to_owned(),
        ..StateBatch::default()
    };
    shared_writer.commit(&batch).await.expect("commit");
    let pool = super::pool(&settings, 2).expect("pool");
    let shared = PgRead::new(pool, MAILBOX.to_owned());
    compare(&local, &shared, "first sync").await;

    // A later sync: some messages gone, some changed (moved to the other folder's words).
    for i in (0..messages.len()).step_by(7) {
        let m = &messages[i].summary;
        local_writer.remove(&m.folder_id, &m.id).expect("remove");
        shared_writer.remove(&m.folder_id, &m.id);
    }
    for i in (3..messages.len()).step_by(11) {
        messages[i].body = format!("{} quokka quokka zephyr", messages[i].body);
        messages[i].summary.is_read = !messages[i].summary.is_read;
        local_writer.put(&messages[i]).expect("put");
        shared_writer.put(&messages[i]).expect("put");
    }
    // A long log removed, one put again still long (other ids, fewer chunks) and one put again
    // short: no chunk of their old bodies may answer.
    local_writer.remove("archive", "long1").expect("remove");
    shared_writer.remove("archive", "long1");
    logs.remove(1);
    logs[0].body = (0..LOG_IDS / 2)
        .map(|k| format!("u9n{k:06} "))
        .chain(["zulu review".to_owned()])
        .collect();
    logs[1].body = "a short log: quokka review".to_owned();
    for log in &logs {
        local_writer.put(log).expect("put");
        shared_writer.put(log).expect("put");
    }
    local_writer.commit().expect("commit");
    shared_writer.commit(&batch).await.expect("commit");
    compare(&local, &shared, "second sync").await;
    shared_writer.close().await;
    admin
        .execute(
            "SELECT set_config('mailgate.mailbox', $1, false)",
            &[&MAILBOX],
        )
        .await
        .expect("scope");
    let chunks: Vec<(String, i64)> = admin
        .query(
            "SELECT id, count(*) FROM mailgate_body_lexemes GROUP BY id ORDER BY id",
            &[],
        )
        .await
        .expect("count the chunks")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let expected = MessageRow::of(&logs[0]).expect("a row").body_chunks.len();
    assert_eq!(
        chunks,
        [("long0".to_owned(), i64::try_from(expected).expect("small"))],
        "the long log put again has its new chunks only; the removed and the shortened none"
    );
}

/// A vector of `dim` numbers near one of eight directions (so messages cluster, as mail on
/// one subject does), from the generator.
fn vector(rng: &mut Rng, dim: usize) -> Vec<f32> {
    let centre = rng.below(8);
    (0..dim)
        .map(|d| {
            let pull = if d % 8 == centre { 3.0 } else { 0.0 };
            pull + (rng.below(2001) as f32 - 1000.0) / 1000.0
        })
        .collect()
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum();
    let norm = |v: &[f32]| v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    dot / (norm(a) * norm(b))
}

/// `found` (id, similarity) against the exact best-passage cosines `truth` of the folder: every
/// similarity within `TOLERANCE` of the exact one, in order, and nothing left out that is
/// clearly closer than the last one listed (int8 and halfvec both round).
fn assert_nearest(what: &str, k: usize, found: &[(String, f32)], truth: &[(String, f64)]) {
    const TOLERANCE: f64 = 0.02;
    let exact = |id: &str| truth.iter().find(|(t, _)| t == id).map(|(_, s)| *s);
    assert_eq!(found.len(), k.min(truth.len()), "{what}: how many");
    for (id, similarity) in found {
        let exact = exact(id).unwrap_or_else(|| panic!("{what}: {id} is not in the folder"));
        assert!(
            (exact - f64::from(*similarity)).abs() < TOLERANCE,
            "{what}: {id} at {similarity}, exactly {exact}"
        );
    }
    for pair in found.windows(2) {
        assert!(
            pair[0].1 + TOLERANCE as f32 >= pair[1].1,
            "{what}: order {pair:?}"
        );
    }
    let last = found
        .last()
        .and_then(|(id, _)| exact(id))
        .unwrap_or(f64::MIN);
    for (id, similarity) in truth {
        if *similarity > last + TOLERANCE {
            assert!(
                found.iter().any(|(f, _)| f == id),
                "{what}: {id} ({similarity}) left out"
            );
        }
    }
}

/// A message's passages: folder, id, vectors.
type Passages = [(String, String, Vec<Vec<f32>>)];

/// The exact best-passage cosine of every message of `folder` to `q`, closest first.
fn exact_nearest(passages: &Passages, folder: &str, q: &[f32]) -> Vec<(String, f64)> {
    let mut best: Vec<(String, f64)> = passages
        .iter()
        .filter(|(f, _, _)| f == folder)
        .map(|(_, id, chunks)| {
            let s = chunks.iter().map(|c| cosine(c, q)).fold(f64::MIN, f64::max);
            (id.clone(), s)
        })
        .collect();
    best.sort_by(|a, b| b.1.total_cmp(&a.1));
    best
}

async fn compare_nearest(
    local: &crate::embed::vectors::VectorStore,
    shared: &PgRead,
    passages: &Passages,
    round: &str,
    rng: &mut Rng,
) {
    use crate::index::store::Nearest;
    for (n, k) in [1, 10, 10, 10, 50, 500].into_iter().enumerate() {
        let q = vector(rng, passages[0].2[0].len());
        for folder in ["inbox", "archive"] {
            let what = format!("{round}: query {n}, k {k}, {folder}");
            let truth = exact_nearest(passages, folder, &q);
            let prefix = crate::index::doc_key(folder, "");
            let mine: Vec<(String, f32)> = local
                .search_where(&q, k, |key| key.starts_with(&prefix))
                .into_iter()
                .map(|(key, s)| (key[prefix.len()..].to_owned(), s))
                .collect();
            assert_nearest(&format!("{what} (local)"), k, &mine, &truth);
            let Nearest::Found(theirs) = shared
                .nearest("fake-embed", &q, k, folder)
                .await
                .expect("nearest")
            else {
                panic!("{what}: the shared store holds vectors");
            };
            assert_nearest(&format!("{what} (shared)"), k, &theirs, &truth);
        }
    }
}

/// Both stores' nearest-passage searches find what an exact scan finds, per folder; a message
/// put again or removed loses its vectors, and vectors of another size are never compared.
#[tokio::test]
async fn the_shared_store_finds_the_nearest_passages_as_the_local_one() {
    use crate::embed::vectors::SyncVectors;
    use crate::embed::vectors::VectorStore;
    use crate::index::store::Nearest;
    let Some((settings, admin)) =
        super::testdb::fresh_settings("parity_vectors", Duration::from_secs(60)).await
    else {
        return;
    };
    const DIM: usize = 32;
    let messages = corpus(400);
    let tmp = tempfile::tempdir().expect("a temp folder");
    let dir = cap_std::fs::Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority())
        .expect("open it");
    let mut local = VectorStore::open(dir, "fake-embed").expect("local vectors");
    let Opened::Ready(mut writer) = PgWrite::open(&settings, MAILBOX, Some("fake-embed"))
        .await
        .expect("open")
    else {
        panic!("a fresh mailbox opens ready");
    };
    let mut rng = Rng(0x7665_6374_6f72);
    let mut passages: Vec<(String, String, Vec<Vec<f32>>)> = Vec::new();
    for m in &messages {
        writer.put(m).expect("put");
        let chunks: Vec<Vec<f32>> = (0..1 + rng.below(4))
            .map(|_| vector(&mut rng, DIM))
            .collect();
        let key = crate::index::doc_key(&m.summary.folder_id, &m.summary.id);
        local.upsert(&key, chunks.clone()).expect("local upsert");
        writer
            .vectors_mut()
            .expect("vectors")
            .upsert(&key, chunks.clone())
            .expect("upsert");
        passages.push((m.summary.folder_id.clone(), m.summary.id.clone(), chunks));
    }
    let batch = StateBatch {
        folder: "inbox".to_owned(),
        ..StateBatch::default()
    };
    writer.commit(&batch).await.expect("commit");
    let hnsw: bool = admin
        .query_one(
            "SELECT to_regclass('mailgate_vectors_hnsw_32') IS NOT NULL",
            &[],
        )
        .await
        .expect("ask")
        .get(0);
    assert!(hnsw, "the first vectors of a size make its HNSW index");
    let pool = super::pool(&settings, 2).expect("pool");
    let shared = PgRead::new(pool, MAILBOX.to_owned());
    compare_nearest(&local, &shared, &passages, "first sync", &mut rng).await;

    // A later sync: some messages removed, some put again without new vectors (their old
    // vectors go with their old text), and some put again and embedded again.
    let mut kept = Vec::new();
    for (i, (folder, id, chunks)) in passages.into_iter().enumerate() {
        let key = crate::index::doc_key(&folder, &id);
        let m = messages
            .iter()
            .find(|m| m.summary.id == id)
            .expect("a message");
        match i % 5 {
            0 => {
                local.remove(&key);
                writer.remove(&folder, &id);
            }
            1 => {
                local.remove(&key);
                writer.put(m).expect("put");
                assert!(!writer.vectors().expect("vectors").contains(&key));
            }
            2 => {
                let fresh = vec![vector(&mut rng, DIM)];
                writer.put(m).expect("put");
                local.upsert(&key, fresh.clone()).expect("local upsert");
                writer
                    .vectors_mut()
                    .expect("vectors")
                    .upsert(&key, fresh.clone())
                    .expect("upsert");
                kept.push((folder, id, fresh));
            }
            _ => kept.push((folder, id, chunks)),
        }
    }
    writer.commit(&batch).await.expect("commit");
    compare_nearest(&local, &shared, &kept, "second sync", &mut rng).await;
    admin
        .execute(
            "SELECT set_config('mailgate.mailbox', $1, false)",
            &[&MAILBOX],
        )
        .await
        .expect("scope");
    let count: i64 = admin
        .query_one(
            "SELECT count(DISTINCT (folder_id, id)) FROM mailgate_vectors",
            &[],
        )
        .await
        .expect("count")
        .get(0);
    assert_eq!(
        count,
        kept.len() as i64,
        "only the kept messages have vectors"
    );

    // The model now answers another size: every vector is stale, and a query of the new size
    // finds none to compare with until they are embedded again.
    let vectors = writer.vectors_mut().expect("vectors");
    assert_eq!(vectors.adopt_dimension(DIM + 16), kept.len());
    assert!(vectors.take_refill());
    writer.commit_vectors().await.expect("commit");
    assert_eq!(
        shared
            .nearest("fake-embed", &[1.0; DIM + 16], 10, "inbox")
            .await
            .expect("nearest"),
        Nearest::NotIndexed
    );
    assert_eq!(
        shared
            .nearest("fake-embed", &[1.0; DIM], 10, "inbox")
            .await
            .expect("nearest"),
        Nearest::NotIndexed
    );
    writer.close().await;
}
