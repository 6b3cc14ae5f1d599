//! The PostgreSQL store's read side: one mailbox's index as the server reads it. Each answer is
//! one read-only transaction on a pooled connection, scoped to the mailbox (row-level security)
//! and at one snapshot, so its counts and its hits agree. Matching is on mailgate's own tokens
//! ([`super::rows`]); ranking is BM25 with the local store's field boosts and constants, from
//! the document frequencies counted at query time and the field lengths and statistics every
//! commit keeps, with recency breaking ties.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio_postgres::types::ToSql;

use super::rows::{self, FIELDS};
use super::store_error;
use super::write::status_of;
use super::{Pool, lease, two_columns, vectors};
use crate::backends::model::{ContentGap, MessageSummary, SortBy, SortOrder};
use crate::index::analyzer;
use crate::index::status::IndexStatus;
use crate::index::store::Nearest;
use crate::index::{CandidateQuery, Clue, IndexError, IndexHits, IndexQuery, stored};

/// BM25's constants, as tantivy's.
const K1: f64 = 1.2;
const B: f64 = 0.75;

/// The fields a text clue of an investigation is looked for in (not the recipients).
const CLUE_FIELDS: [usize; 5] = [
    0,
    1,
    rows::BODY,
    rows::ATTACHMENT_NAMES,
    rows::ATTACHMENT_TEXT,
];

/// One mailbox's index in the shared database.
pub(crate) struct PgRead {
    pool: Pool,
    mailbox: String,
    /// The last status read named another text analysis than this binary's.
    outdated: AtomicBool,
    /// A status was read once: the mailbox has an index here (a purge later makes its reads
    /// say so, as the local store's do).
    seen: AtomicBool,
}

/// An SQL statement being written, with its parameters.
#[derive(Default)]
struct Statement {
    sql: String,
    params: Vec<Box<dyn ToSql + Sync + Send>>,
}

impl Statement {
    /// Adds a parameter, and returns its placeholder.
    fn param(&mut self, value: impl ToSql + Sync + Send + 'static) -> String {
        self.params.push(Box::new(value));
        format!("${}", self.params.len())
    }

    fn params(&self) -> Vec<&(dyn ToSql + Sync)> {
        self.params
            .iter()
            .map(|p| p.as_ref() as &(dyn ToSql + Sync))
            .collect()
    }
}

type Tx<'a> = deadpool_postgres::Transaction<'a>;

impl PgRead {
    pub(crate) fn new(pool: Pool, mailbox: String) -> Self {
        Self {
            pool,
            mailbox,
            outdated: AtomicBool::new(false),
            seen: AtomicBool::new(false),
        }
    }

    /// Runs `read` in a read-only transaction scoped to this mailbox.
    async fn read<T>(
        &self,
        read: impl AsyncFnOnce(&Tx<'_>) -> Result<T, IndexError>,
    ) -> Result<T, IndexError> {
        let mut conn = self.pool.get().await.map_err(store_error)?;
        let tx = conn
            .build_transaction()
            .read_only(true)
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .start()
            .await
            .map_err(store_error)?;
        lease::scope_to(&*tx, &self.mailbox)
            .await
            .map_err(store_error)?;
        let out = read(&tx).await?;
        tx.commit().await.map_err(store_error)?;
        Ok(out)
    }

    pub(crate) async fn status(&self) -> Result<IndexStatus, IndexError> {
        let (status, analyzer) = self
            .read(async |tx| {
                let row = tx
                    .query_opt(
                        "SELECT status::text, paused, analyzer FROM mailgate_mailboxes
                          WHERE mailbox = current_setting('mailgate.mailbox')",
                        &[],
                    )
                    .await
                    .map_err(store_error)?;
                let analyzer: Option<i32> = match &row {
                    Some(row) => Some(row.try_get(2).map_err(store_error)?),
                    None => None,
                };
                Ok((status_of(row)?, analyzer))
            })
            .await?;
        let current = i64::from(crate::text::ANALYZER_VERSION);
        self.outdated.store(
            analyzer.is_some_and(|a| i64::from(a) != current),
            Ordering::Relaxed,
        );
        let status = status.ok_or(IndexError::Missing)?;
        self.seen.store(true, Ordering::Relaxed);
        Ok(status)
    }

    /// Whether the store holds an index of this mailbox: known once a status was read, else
    /// asked. A store that cannot be asked counts as holding one, so its answers say the index
    /// failed rather than that there is none.
    pub(crate) async fn present(&self) -> bool {
        if self.seen.load(Ordering::Relaxed) {
            return true;
        }
        !matches!(self.status().await, Err(IndexError::Missing))
    }

    pub(crate) fn outdated(&self) -> bool {
        self.outdated.load(Ordering::Relaxed)
    }

    pub(crate) async fn search(&self, q: &IndexQuery) -> Result<IndexHits, IndexError> {
        let words: Vec<Vec<String>> = q
            .words
            .iter()
            .map(|w| crate::text::query_tokens(w))
            .filter(|t| !t.is_empty())
            .collect();
        self.read(async |tx| {
            let (in_scope, gaps) = scope_counts(tx, q.folder_id.as_deref()).await?;
            if !q.words.is_empty() && words.is_empty() {
                // A query of no indexable word matches nothing, and proves nothing either.
                return Ok(IndexHits {
                    in_scope,
                    ..IndexHits::default()
                });
            }
            let mut st = Statement::default();
            let mut conditions = filter_conditions(&mut st, q);
            // Every token of every word occurs in some field; each occurrence scores.
            let tokens: Vec<&String> = words.iter().flatten().collect();
            // Ranked by relevance only when asked for no order.
            let ranked = !tokens.is_empty() && q.order.is_none();
            let mut score = String::from("0");
            if !tokens.is_empty() {
                let weights = if ranked {
                    weights(tx, &tokens).await?
                } else {
                    vec![[None; 6]; tokens.len()]
                };
                for (token, per_field) in tokens.iter().zip(&weights) {
                    let query = st.param(tsquery_of(token));
                    let mut any = Vec::new();
                    for (f, (column, _)) in FIELDS.iter().enumerate() {
                        let test = format!("{column} @@ {query}::text::tsquery");
                        if let Some((weight, norm)) = per_field[f] {
                            let key = st.param(rows::repeat_key(f, token));
                            let tf = format!("coalesce((repeats ->> {key}::text)::float8, 1)");
                            let _ = write!(
                                score,
                                " + CASE WHEN {test} THEN {weight:e} * {tf} / ({tf} + \
                                 {K1:e} * (1 - {B:e} + {norm:e} * field_lengths[{}])) ELSE 0 END",
                                f + 1
                            );
                        }
                        any.push(test);
                    }
                    conditions.push(format!("({})", any.join(" OR ")));
                }
            }
            let order = if ranked {
                "{t}score DESC, {t}received DESC, {t}id".to_owned()
            } else {
                let order = q.order.unwrap_or_default();
                let direction = match order.direction {
                    SortOrder::Asc => "ASC",
                    SortOrder::Desc => "DESC",
                };
                match order.by {
                    SortBy::ReceivedDateTime => format!("{{t}}received {direction}, {{t}}id"),
                    SortBy::Subject => {
                        format!("{{t}}subject_raw COLLATE \"C\" {direction}, {{t}}id")
                    }
                }
            };
            let limit = st.param(i64::try_from(q.limit.max(1)).unwrap_or(i64::MAX));
            st.sql = top(&score, &where_all(&conditions), &order, &limit);
            hits(tx, &st, in_scope, gaps).await
        })
        .await
    }

    pub(crate) async fn candidates(&self, q: &CandidateQuery) -> Result<IndexHits, IndexError> {
        self.read(async |tx| {
            let (in_scope, gaps) = scope_counts(tx, Some(&q.folder_id)).await?;
            let mut st = Statement::default();
            let mut any = Vec::new();
            for clue in &q.clues {
                match clue {
                    Clue::Text(text) => any.push(spelled_in(&mut st, text, &CLUE_FIELDS)),
                    Clue::AttachmentName(text) => {
                        any.push(spelled_in(&mut st, text, &[rows::ATTACHMENT_NAMES]));
                    }
                    Clue::Gap => any.push("gap <> 0".to_owned()),
                    Clue::UnreadAttachments => any.push("attachments_unread".to_owned()),
                }
            }
            if any.is_empty() {
                return Ok(IndexHits {
                    in_scope,
                    gaps,
                    ..IndexHits::default()
                });
            }
            let folder = st.param(q.folder_id.clone());
            let limit = st.param(i64::try_from(q.limit.max(1)).unwrap_or(i64::MAX));
            st.sql = top(
                "0",
                &format!("folder_id = {folder} AND ({})", any.join(" OR ")),
                "{t}received DESC, {t}id",
                &limit,
            );
            hits(tx, &st, in_scope, gaps).await
        })
        .await
    }

    pub(crate) async fn summary(&self, id: &str) -> Result<Option<MessageSummary>, IndexError> {
        self.read(async |tx| {
            let row = tx
                .query_opt(
                    "SELECT summary FROM mailgate_messages WHERE id = $1 LIMIT 1",
                    &[&id],
                )
                .await
                .map_err(store_error)?;
            row.map(|r| stored::decode(&r.try_get::<_, Vec<u8>>(0).map_err(store_error)?))
                .transpose()
        })
        .await
    }

    pub(crate) async fn summaries_in(
        &self,
        folder_id: &str,
        ids: &[&str],
    ) -> Result<Vec<Option<MessageSummary>>, IndexError> {
        let found: HashMap<String, Vec<u8>> = self
            .read(async |tx| {
                let rows = tx
                    .query(
                        "SELECT id, summary FROM mailgate_messages
                          WHERE folder_id = $1 AND id = ANY($2)",
                        &[&folder_id, &ids],
                    )
                    .await
                    .map_err(store_error)?;
                two_columns(&rows)
            })
            .await?;
        ids.iter()
            .map(|id| found.get(*id).map(|b| stored::decode(b)).transpose())
            .collect()
    }

    pub(crate) async fn message_ids(
        &self,
        messages: &[(&str, &str)],
    ) -> Result<Vec<Option<String>>, IndexError> {
        let (folders, ids): (Vec<&str>, Vec<&str>) = messages.iter().copied().unzip();
        let found: HashMap<(String, String), Option<String>> = self
            .read(async |tx| {
                let rows = tx
                    .query(
                        "SELECT folder_id, id, internet_message_id FROM mailgate_messages
                          WHERE (folder_id, id) IN (SELECT * FROM unnest($1::text[], $2::text[]))",
                        &[&folders, &ids],
                    )
                    .await
                    .map_err(store_error)?;
                rows.iter()
                    .map(|r| {
                        Ok((
                            (
                                r.try_get(0).map_err(store_error)?,
                                r.try_get(1).map_err(store_error)?,
                            ),
                            r.try_get(2).map_err(store_error)?,
                        ))
                    })
                    .collect()
            })
            .await?;
        Ok(messages
            .iter()
            .map(|(f, i)| {
                found
                    .get(&((*f).to_owned(), (*i).to_owned()))
                    .cloned()
                    .flatten()
            })
            .collect())
    }

    /// The `k` messages of `folder_id` whose best passage of `model` is closest to `query`
    /// ([`vectors::nearest`]).
    pub(crate) async fn nearest(
        &self,
        model: &str,
        query: &[f32],
        k: usize,
        folder_id: &str,
    ) -> Result<Nearest, IndexError> {
        self.read(async |tx| vectors::nearest(&**tx, model, query, k, folder_id).await)
            .await
    }
}

fn tsquery_of(token: &str) -> String {
    let mut out = String::new();
    rows::quoted(token, &mut out);
    out
}

fn where_all(conditions: &[String]) -> String {
    if conditions.is_empty() {
        "TRUE".to_owned()
    } else {
        conditions.join(" AND ")
    }
}

/// The condition that one of `fields` spells `text` ([`analyzer::spelling`]).
fn spelled_in(st: &mut Statement, text: &str, fields: &[usize]) -> String {
    let Some(per_atom) = analyzer::spelling(text) else {
        return "TRUE".to_owned();
    };
    let query = st.param(rows::all_of_any(&per_atom));
    let any: Vec<String> = fields
        .iter()
        .map(|&f| format!("{} @@ {query}::text::tsquery", FIELDS[f].0))
        .collect();
    format!("({})", any.join(" OR "))
}

/// The folder and the structured filters.
fn filter_conditions(st: &mut Statement, q: &IndexQuery) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(folder) = &q.folder_id {
        out.push(format!("folder_id = {}", st.param(folder.clone())));
    }
    let f = &q.filters;
    if let Some(sender) = &f.sender {
        let needle = st.param(stored::raw(sender));
        out.push(format!(
            "EXISTS (SELECT 1 FROM unnest(from_raw) AS v WHERE strpos(v, {needle}) > 0)"
        ));
    }
    if let Some(subject) = &f.subject {
        out.push(format!(
            "strpos(subject_raw, {}) > 0",
            st.param(stored::raw(subject))
        ));
    }
    if let Some(from) = f.date_from {
        out.push(format!("received >= {}", st.param(from.timestamp())));
    }
    if let Some(to) = f.date_to {
        out.push(format!("received <= {}", st.param(to.timestamp())));
    }
    if let Some(want) = f.has_attachments {
        out.push(format!("has_attachments = {}", st.param(want)));
    }
    if let Some(want) = f.is_read {
        out.push(format!("is_read = {}", st.param(want)));
    }
    out
}

/// Per token, per field: BM25's weight (boost, idf and `k1 + 1`) and length factor (`b` over
/// the average length), `None` where no message holds the token in that field.
async fn weights(
    tx: &Tx<'_>,
    tokens: &[&String],
) -> Result<Vec<[Option<(f64, f64)>; 6]>, IndexError> {
    let stats = tx
        .query_one(
            "SELECT docs, field_tokens FROM mailgate_mailboxes
              WHERE mailbox = current_setting('mailgate.mailbox')",
            &[],
        )
        .await
        .map_err(store_error)?;
    let docs: i64 = stats.try_get(0).map_err(store_error)?;
    let field_tokens: Vec<i64> = stats.try_get(1).map_err(store_error)?;
    let counts = FIELDS
        .iter()
        .map(|(column, _)| {
            format!("(SELECT count(*) FROM mailgate_messages WHERE {column} @@ t.q::tsquery)")
        })
        .collect::<Vec<_>>()
        .join(", ");
    let queries: Vec<String> = tokens.iter().map(|t| tsquery_of(t)).collect();
    let rows = tx
        .query(
            &format!(
                "SELECT {counts} FROM unnest($1::text[]) WITH ORDINALITY AS t(q, n) ORDER BY n"
            ),
            &[&queries],
        )
        .await
        .map_err(store_error)?;
    let n = docs.max(1) as f64;
    rows.iter()
        .map(|row| {
            let mut out = [None; 6];
            for (f, (_, boost)) in FIELDS.iter().enumerate() {
                let df: i64 = row.try_get(f).map_err(store_error)?;
                let total = field_tokens.get(f).copied().unwrap_or(0);
                if df == 0 || total == 0 {
                    continue;
                }
                let df = df as f64;
                let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
                let average = total as f64 / n;
                out[f] = Some((boost * idf * (1.0 + K1), B / average));
            }
            Ok(out)
        })
        .collect()
}

/// How many messages the scope holds, and how many of them are not wholly indexed, by kind.
async fn scope_counts(
    tx: &Tx<'_>,
    folder: Option<&str>,
) -> Result<(usize, Vec<(ContentGap, usize)>), IndexError> {
    let gaps = stored::GAPS
        .iter()
        .map(|g| {
            format!(
                ", count(*) FILTER (WHERE gap = {})",
                stored::gap_code(Some(*g))
            )
        })
        .collect::<String>();
    let row = match folder {
        Some(folder) => {
            tx.query_one(
                &format!("SELECT count(*){gaps} FROM mailgate_messages WHERE folder_id = $1"),
                &[&folder],
            )
            .await
        }
        None => {
            tx.query_one(
                &format!("SELECT count(*){gaps} FROM mailgate_messages"),
                &[],
            )
            .await
        }
    }
    .map_err(store_error)?;
    let count = |i: usize| -> Result<usize, IndexError> {
        let n: i64 = row.try_get(i).map_err(store_error)?;
        Ok(usize::try_from(n).unwrap_or(0))
    };
    let mut gaps = Vec::new();
    for (i, gap) in stored::GAPS.iter().enumerate() {
        let n = count(i + 1)?;
        if n > 0 {
            gaps.push((*gap, n));
        }
    }
    Ok((count(0)?, gaps))
}

/// The hits statement: the best `limit` messages that meet `conditions` by `order` (where
/// `{t}` stands for the table the columns are read from), with their `score` and how many met
/// them in all. Every match is scored and counted from its narrow columns first; only the
/// kept ones' summaries are read (a window over whole rows would carry every match's
/// summary, and spill to disk for a common word).
fn top(score: &str, conditions: &str, order: &str, limit: &str) -> String {
    let inner = order.replace("{t}", "");
    let outer = order.replace("{t}", "t.");
    // OFFSET 0 keeps the scoring subquery whole, so each match is scored once, before the
    // window, rather than the window carrying the row to the sort.
    format!(
        "SELECT m.summary, t.score, t.total FROM (
           SELECT folder_id, id, received, subject_raw, score, count(*) OVER () AS total
             FROM (SELECT folder_id, id, received, subject_raw, ({score})::float4 AS score
                     FROM mailgate_messages WHERE {conditions} OFFSET 0) AS s
            ORDER BY {inner} LIMIT {limit}) AS t
         JOIN mailgate_messages AS m USING (folder_id, id)
         ORDER BY {outer}"
    )
}

/// Runs a hits statement (summary, score, matches in all): the answer, with the scope's counts.
async fn hits(
    tx: &Tx<'_>,
    st: &Statement,
    in_scope: usize,
    gaps: Vec<(ContentGap, usize)>,
) -> Result<IndexHits, IndexError> {
    let rows = tx
        .query(st.sql.as_str(), &st.params())
        .await
        .map_err(store_error)?;
    let mut matched = 0;
    let mut out = Vec::with_capacity(rows.len());
    for row in &rows {
        let summary: Vec<u8> = row.try_get(0).map_err(store_error)?;
        let score: f32 = row.try_get(1).map_err(store_error)?;
        let all: i64 = row.try_get(2).map_err(store_error)?;
        matched = usize::try_from(all).unwrap_or(0);
        out.push((stored::decode(&summary)?, score));
    }
    Ok(IndexHits {
        hits: out,
        matched,
        in_scope,
        gaps,
    })
}
