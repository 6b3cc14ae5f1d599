//! The PostgreSQL store's read side: one mailbox's index as the server reads it. Each answer is
//! one read-only transaction on a pooled connection, scoped to the mailbox (row-level security)
//! and at one snapshot, so its counts and its hits agree. Matching is on mailgate's own tokens
//! ([`super::rows`]); ranking is BM25 with the local store's field boosts and constants, from
//! the document frequencies counted at query time and the field lengths and statistics every
//! commit keeps, with recency breaking ties.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio_postgres::types::ToSql;

use super::rows::{self, FIELDS};
use super::store_error;
use super::write::status_of;
use super::{Pool, two_columns, vectors};
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
        // The mailbox (as `lease::scope_to` sets it) and the planner's settings, in one round
        // trip. The planner prices a sequential scan of a common word below its bitmap scan,
        // but the scan would test (and so unpack) every row's token vectors, which are large
        // and often out of line: measured at 100,000 messages, 3 to 4 times slower. Room for
        // the window over every match of a common word, without spilling to disk.
        tx.execute(
            "SELECT set_config('mailgate.mailbox', $1, true),
                    set_config('enable_seqscan', 'off', true),
                    set_config('work_mem', '16MB', true)",
            &[&self.mailbox],
        )
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
            let filters = where_all(&filter_conditions(&mut st, q));
            // Every token of every word occurs in some field; each occurrence scores.
            let tokens: Vec<&String> = words.iter().flatten().collect();
            // Ranked by relevance only when asked for no order.
            let ranked = !tokens.is_empty() && q.order.is_none();
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
            let scored = if tokens.is_empty() {
                format!(
                    "SELECT folder_id, id, received, subject_raw, 0::float4 AS score
                       FROM mailgate_messages
                      WHERE mailbox = current_setting('mailgate.mailbox') AND {filters}"
                )
            } else {
                let ranking = if ranked {
                    Some(statistics(tx).await?)
                } else {
                    None
                };
                matches_scored(&mut st, &tokens, ranking.as_ref(), &filters)
            };
            st.sql = top(&scored, &order, &limit);
            hits(tx, &st, in_scope, gaps).await
        })
        .await
    }

    pub(crate) async fn candidates(&self, q: &CandidateQuery) -> Result<IndexHits, IndexError> {
        self.read(async |tx| {
            let (in_scope, gaps) = scope_counts(tx, Some(&q.folder_id)).await?;
            let mut st = Statement::default();
            let folder = st.param(q.folder_id.clone());
            let mut any = Vec::new();
            // Per text clue, its spelling in a long body's row and chunks together.
            let mut in_chunks = Vec::new();
            for clue in &q.clues {
                match clue {
                    Clue::Text(text) => match analyzer::spelling(text) {
                        Some(per_atom) => {
                            any.push(spelled_in(&mut st, &per_atom, &CLUE_FIELDS));
                            in_chunks.push(spelled_in_chunks(&mut st, &per_atom, &folder));
                        }
                        None => any.push("TRUE".to_owned()),
                    },
                    Clue::AttachmentName(text) => any.push(match analyzer::spelling(text) {
                        Some(per_atom) => spelled_in(&mut st, &per_atom, &[rows::ATTACHMENT_NAMES]),
                        None => "TRUE".to_owned(),
                    }),
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
            let limit = st.param(i64::try_from(q.limit.max(1)).unwrap_or(i64::MAX));
            // The row's fields in one condition (the text indexes' bitmaps ORed), and each text
            // clue's spelling across a long body's chunks in a branch of its own (a condition
            // on the chunks inside the OR would keep the planner from those bitmaps). UNION:
            // a message both find counts once.
            let of_folder = |condition: &str| {
                format!(
                    "SELECT folder_id, id, received, subject_raw, 0::float4 AS score
                       FROM mailgate_messages AS m
                      WHERE m.mailbox = current_setting('mailgate.mailbox')
                        AND m.folder_id = {folder} AND ({condition})"
                )
            };
            let scored = std::iter::once(of_folder(&any.join(" OR ")))
                .chain(in_chunks.iter().map(|c| of_folder(c)))
                .collect::<Vec<_>>()
                .join(" UNION ");
            st.sql = top(&scored, "{t}received DESC, {t}id", &limit);
            hits(tx, &st, in_scope, gaps).await
        })
        .await
    }

    pub(crate) async fn summary(&self, id: &str) -> Result<Option<MessageSummary>, IndexError> {
        self.read(async |tx| {
            let row = tx
                .query_opt(
                    "SELECT summary FROM mailgate_messages
                      WHERE mailbox = current_setting('mailgate.mailbox') AND id = $1 LIMIT 1",
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
                          WHERE mailbox = current_setting('mailgate.mailbox')
                            AND folder_id = $1 AND id = ANY($2)",
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
                          WHERE mailbox = current_setting('mailgate.mailbox')
                            AND (folder_id, id) IN (SELECT * FROM unnest($1::text[], $2::text[]))",
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

/// The condition that one of `fields` of a message's row spells a text whose atoms' spellings
/// are `per_atom` ([`analyzer::spelling`]): every atom in that one field.
fn spelled_in(st: &mut Statement, per_atom: &[Vec<String>], fields: &[usize]) -> String {
    let query = st.param(rows::all_of_any(per_atom));
    let any: Vec<String> = fields
        .iter()
        .map(|&f| format!("{} @@ {query}::text::tsquery", FIELDS[f].0))
        .collect();
    format!("({})", any.join(" OR "))
}

/// The condition (on `mailgate_messages AS m` of the folder `folder` names) that a long body
/// spells the text of `per_atom` across its row's lexemes and its chunks, where no one of them
/// need hold every atom: a message whose chunks hold some spelling of some atom, and each atom
/// spelled in its row's body or one of its chunks. Every part is a GIN bitmap scan of the
/// folder's rows or chunks that reads their ids only (an atom's, run once and hashed): testing a
/// candidate's own lexemes instead would unpack its row's and every chunk's, a megabyte each. A
/// body that spells the text in its row alone is found by [`spelled_in`] too.
fn spelled_in_chunks(st: &mut Statement, per_atom: &[Vec<String>], folder: &str) -> String {
    let in_chunks = |query: &str| {
        format!(
            "m.id IN (SELECT id FROM {} AS c)",
            chunks_holding(
                "id",
                &format!("folder_id = {folder} AND tokens @@ {query}::text::tsquery")
            )
        )
    };
    let some: Vec<String> = per_atom.iter().flatten().cloned().collect();
    let some = st.param(rows::all_of_any(&[some]));
    let mut out = vec![in_chunks(&some)];
    if per_atom.len() > 1 {
        for atom in per_atom {
            let atom = st.param(rows::all_of_any(std::slice::from_ref(atom)));
            out.push(format!(
                "(m.id IN (SELECT id FROM mailgate_messages
                            WHERE mailbox = current_setting('mailgate.mailbox')
                              AND folder_id = {folder} AND body_tokens @@ {atom}::text::tsquery)
                  OR {})",
                in_chunks(&atom)
            ));
        }
    }
    out.join(" AND ")
}

/// The scoped mailbox's chunks that meet `condition` (on their tokens), as a subquery of their
/// `columns`, for a statement to join to their messages. A chunk's tokens are only ever matched
/// through their GIN index, which reads none of them: any other path tests (and so unpacks,
/// most of a megabyte each) every chunk it passes, a cost the planner does not see. `OFFSET 0`
/// keeps the subquery planned on its own, so no join can turn it into a look-up of each
/// message's chunks by id (the one other index of the table, there for its row's cascade), and
/// reads turn sequential scans off.
fn chunks_holding(columns: &str, condition: &str) -> String {
    format!(
        "(SELECT {columns} FROM mailgate_body_lexemes
           WHERE mailbox = current_setting('mailgate.mailbox') AND {condition} OFFSET 0)"
    )
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

/// BM25's statistics of the scoped mailbox: how many messages, and per field `b` over the
/// field's average length (`None` for a field no message has a token in).
async fn statistics(tx: &Tx<'_>) -> Result<Ranking, IndexError> {
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
    let n = docs.max(1) as f64;
    let mut norms = [None; 6];
    for (f, norm) in norms.iter_mut().enumerate() {
        let total = field_tokens.get(f).copied().unwrap_or(0);
        if total > 0 {
            *norm = Some(B / (total as f64 / n));
        }
    }
    Ok(Ranking { docs: n, norms })
}

/// What ranking a search needs beside each token's document frequencies.
struct Ranking {
    docs: f64,
    norms: [Option<f64>; 6],
}

/// How many messages the scope holds, and how many of them are not wholly indexed, by kind:
/// from the counts every commit keeps (counting the messages would read every row of the
/// scope, on every answer).
async fn scope_counts(
    tx: &Tx<'_>,
    folder: Option<&str>,
) -> Result<(usize, Vec<(ContentGap, usize)>), IndexError> {
    let rows = match folder {
        Some(folder) => {
            tx.query(
                "SELECT gap, messages FROM mailgate_folder_counts
                  WHERE mailbox = current_setting('mailgate.mailbox') AND folder_id = $1",
                &[&folder],
            )
            .await
        }
        None => {
            tx.query(
                "SELECT gap, sum(messages)::bigint FROM mailgate_folder_counts
                  WHERE mailbox = current_setting('mailgate.mailbox') GROUP BY gap",
                &[],
            )
            .await
        }
    }
    .map_err(store_error)?;
    let per_gap: HashMap<i16, i64> = two_columns(&rows)?;
    let count = |n: i64| usize::try_from(n).unwrap_or(0);
    let in_scope = per_gap.values().copied().map(count).sum();
    let mut gaps = Vec::new();
    for gap in stored::GAPS {
        let code = i16::try_from(stored::gap_code(Some(gap))).unwrap_or(i16::MAX);
        let n = per_gap.get(&code).copied().map_or(0, count);
        if n > 0 {
            gaps.push((gap, n));
        }
    }
    Ok((in_scope, gaps))
}

/// The messages that hold every token in some field and meet `filters`, each with its BM25
/// score when `ranking` is given. One branch per token and field (two for the body: its row's
/// lexemes and its chunks'): a GIN bitmap scan that reads the row's narrow columns and never
/// the token vectors (large, and often out of line). Ranked, the branches cover the whole
/// mailbox, so each one's row count is the token's document frequency in that field (the
/// body's two branches counted as one), counted in the same pass that scores (a count apart
/// would read the same rows twice); the filters apply after. A message holds every token when
/// its branches name every one.
fn matches_scored(
    st: &mut Statement,
    tokens: &[&String],
    ranking: Option<&Ranking>,
    filters: &str,
) -> String {
    let mut branches = Vec::new();
    for (t, token) in tokens.iter().enumerate() {
        // A parameter only once a branch uses it: PostgreSQL refuses one it cannot type.
        let mut query = None;
        for (f, (column, boost)) in FIELDS.iter().enumerate() {
            let (score_columns, scope) = match ranking.map(|r| r.norms[f]) {
                // No message has a token in this field: no branch can match.
                Some(None) => continue,
                Some(Some(norm)) => {
                    let key = st.param(rows::repeat_key(f, token));
                    (
                        format!(
                            ", {f} AS field, {boost:e}::float8 AS boost, {norm:e}::float8 AS norm,
                             field_lengths[{len}] AS len,
                             coalesce((repeats ->> {key}::text)::float8, 1) AS tf",
                            len = f + 1
                        ),
                        "TRUE".to_owned(),
                    )
                }
                None => (String::new(), filters.to_owned()),
            };
            let query = query.get_or_insert_with(|| st.param(tsquery_of(token)));
            branches.push(format!(
                "SELECT folder_id, id, received, subject_raw, from_raw, is_read, has_attachments,
                        {t} AS token{score_columns}
                   FROM mailgate_messages
                  WHERE mailbox = current_setting('mailgate.mailbox')
                    AND {column} @@ {query}::text::tsquery AND {scope}"
            ));
            if f == rows::BODY {
                // A long body's further lexemes: the chunks that hold the token
                // ([`chunks_holding`]), each joined to its message's row for the same narrow and
                // score columns (the row's names: the chunks have none of them but the key). A
                // token is in the row or in one chunk, never both, so each message counts once
                // in the token's frequency.
                branches.push(format!(
                    "SELECT folder_id, id, received, subject_raw, from_raw, is_read,
                            has_attachments, {t} AS token{score_columns}
                       FROM {chunks} AS c
                       JOIN mailgate_messages AS m USING (mailbox, folder_id, id)
                      WHERE m.mailbox = current_setting('mailgate.mailbox') AND {scope}",
                    chunks = chunks_holding(
                        "mailbox, folder_id, id",
                        &format!("tokens @@ {query}::text::tsquery")
                    )
                ));
            }
        }
    }
    if branches.is_empty() {
        // No token is held by any message; the filters stay, so their parameters are typed.
        return format!(
            "SELECT folder_id, id, received, subject_raw, 0::float4 AS score
               FROM mailgate_messages
              WHERE FALSE AND mailbox = current_setting('mailgate.mailbox') AND {filters}"
        );
    }
    // One token needs no count of the tokens a message holds (and so no sorted aggregate).
    let every = if tokens.len() > 1 {
        format!("HAVING count(DISTINCT token) = {}", tokens.len())
    } else {
        String::new()
    };
    let union = branches.join(" UNION ALL ");
    match ranking {
        // As the local store: weight = boost × idf × (k1 + 1), then tf saturation over the
        // field's length, in the same order of operations.
        Some(r) => format!(
            "SELECT folder_id, id, max(received) AS received, max(subject_raw) AS subject_raw,
                    sum(boost * ln(1 + ({n:e} - df + 0.5) / (df + 0.5)) * {k1p:e} * tf
                        / (tf + {K1:e} * (1 - {B:e} + norm * len)))::float4 AS score
               FROM (SELECT b.*, count(*) OVER (PARTITION BY token, field)::float8 AS df
                       FROM ({union}) AS b) AS d
              WHERE {filters}
              GROUP BY folder_id, id {every}",
            n = r.docs,
            k1p = 1.0 + K1
        ),
        None => format!(
            "SELECT folder_id, id, max(received) AS received, max(subject_raw) AS subject_raw,
                    0::float4 AS score
               FROM ({union}) AS p GROUP BY folder_id, id {every}"
        ),
    }
}

/// The hits statement: the best `limit` messages of `scored` (a subquery of folder_id, id,
/// received, subject_raw and score) by `order` (where `{t}` stands for the table the columns
/// are read from), with how many there are in all. Every match is ranked and counted from
/// those narrow columns; only the kept ones' summaries are read (a window over whole rows
/// would carry every match's summary, and spill to disk for a common word).
fn top(scored: &str, order: &str, limit: &str) -> String {
    let inner = order.replace("{t}", "");
    let outer = order.replace("{t}", "t.");
    // OFFSET 0 keeps the scored subquery whole, so each match is scored once, before the
    // window, rather than the window carrying the row to the sort.
    format!(
        "SELECT m.summary, t.score, t.total FROM (
           SELECT folder_id, id, received, subject_raw, score, count(*) OVER () AS total
             FROM ({scored} OFFSET 0) AS s
            ORDER BY {inner} LIMIT {limit}) AS t
         JOIN mailgate_messages AS m USING (folder_id, id)
        WHERE m.mailbox = current_setting('mailgate.mailbox')
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
