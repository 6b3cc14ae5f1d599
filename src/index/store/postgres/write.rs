//! The PostgreSQL store's write side: one sync's writer of one mailbox. It holds the mailbox's
//! lease ([`super::lease`]) for as long as it lives, renewed by a task on a connection of its
//! own; what the sync puts and removes waits in memory until a commit, which writes the
//! messages, the ranking statistics and the sync's state in one transaction fenced by the
//! lease's epoch: a writer that lost its lease commits nothing, and a sync killed at any point
//! leaves the last commit whole.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio_postgres::{Client, Transaction};

use super::lease::{self, Lease, LeaseError, Taken};
use super::rows::MessageRow;
use super::vectors::PgVectors;
use super::{PgSettings, store_error};
use crate::index::state::{FolderCursor, StateBatch};
use crate::index::status::IndexStatus;
use crate::index::store::{Opened, Rebuild};
use crate::index::{IndexError, IndexedMessage};

/// What waits for the next commit, per message key (the last put or remove wins).
enum Pending {
    Put(Box<MessageRow>),
    Remove,
}

fn lease_error(e: LeaseError) -> IndexError {
    match e {
        LeaseError::Lost => IndexError::Busy,
        LeaseError::Store(e) => store_error(e),
    }
}

/// One mailbox's index opened for a sync.
pub(crate) struct PgWrite {
    client: Client,
    lease: Lease,
    lost: Arc<AtomicBool>,
    /// `mailgate index pause` was run for the mailbox (seen by the renewal task).
    paused: Arc<AtomicBool>,
    renewal: tokio::task::JoinHandle<Client>,
    stop_renewal: Arc<tokio::sync::Notify>,
    rebuilt: Option<Rebuild>,
    pending: HashMap<(String, String), Pending>,
    /// The vectors, when this sync embeds.
    vectors: Option<PgVectors>,
}

/// A name for this sync, unique among every instance's (the lease's holder).
pub(crate) fn holder() -> String {
    use rand::RngExt as _;
    let nonce: [u8; 8] = rand::rng().random();
    format!(
        "sync:{}:{}",
        std::process::id(),
        nonce.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

impl PgWrite {
    /// Takes the lease of `mailbox` and opens its index for a sync. Another sync holding the
    /// lease is [`IndexError::Busy`]; an index built by another text analysis is emptied
    /// first ([`Rebuild::Analyzer`]) under the lease.
    pub(crate) async fn open(
        settings: &PgSettings,
        mailbox: &str,
        semantic_model: Option<&str>,
    ) -> Result<Opened<Self>, IndexError> {
        let mut client = super::connect(settings).await.map_err(store_error)?;
        let mut renewer = super::connect(settings).await.map_err(store_error)?;
        let lease = match lease::take(&mut renewer, mailbox, &holder(), settings.lease_ttl)
            .await
            .map_err(store_error)?
        {
            Taken::Held(lease) => lease,
            Taken::Busy => return Err(IndexError::Busy),
        };
        // These connections only ever touch this mailbox.
        for c in [&client, &renewer] {
            c.execute(
                "SELECT set_config('mailgate.mailbox', $1, false)",
                &[&mailbox],
            )
            .await
            .map_err(store_error)?;
        }
        let opened = Self::prepare(&mut client, &lease, semantic_model).await;
        let opened = match opened {
            Ok(opened) => opened,
            Err(e) => {
                let _ = lease.release(&mut renewer).await;
                return Err(e);
            }
        };
        let (rebuilt, vectors) = match opened {
            Prepared::Ready(rebuilt, vectors) => (rebuilt, vectors),
            Prepared::Paused => {
                let _ = lease.release(&mut renewer).await;
                return Ok(Opened::Paused);
            }
        };
        let lost = Arc::new(AtomicBool::new(false));
        let paused = Arc::new(AtomicBool::new(false));
        let stop_renewal = Arc::new(tokio::sync::Notify::new());
        let renewal = tokio::spawn(renew(
            renewer,
            lease.clone(),
            Renewal {
                ttl: settings.lease_ttl,
                lost: Arc::clone(&lost),
                paused: Arc::clone(&paused),
                stop: Arc::clone(&stop_renewal),
            },
        ));
        Ok(Opened::Ready(Box::new(Self {
            client,
            lease,
            lost,
            paused,
            renewal,
            stop_renewal,
            rebuilt,
            pending: HashMap::new(),
            vectors,
        })))
    }

    /// Creates the mailbox's row, or empties an index of another text analysis, and loads the
    /// vectors of `semantic_model`.
    async fn prepare(
        client: &mut Client,
        lease: &Lease,
        semantic_model: Option<&str>,
    ) -> Result<Prepared, IndexError> {
        let tx = client.transaction().await.map_err(store_error)?;
        lease.fence(&tx).await.map_err(lease_error)?;
        let row = tx
            .query_opt(
                "SELECT analyzer, paused, status IS NOT NULL FROM mailgate_mailboxes
                  WHERE mailbox = current_setting('mailgate.mailbox')",
                &[],
            )
            .await
            .map_err(store_error)?;
        let current = i32::try_from(crate::text::ANALYZER_VERSION)
            .map_err(|_| IndexError::Store("analyzer version".to_owned()))?;
        let rebuilt = match row {
            None => {
                tx.execute(
                    "INSERT INTO mailgate_mailboxes (mailbox, analyzer)
                     VALUES (current_setting('mailgate.mailbox'), $1)",
                    &[&current],
                )
                .await
                .map_err(store_error)?;
                None
            }
            Some(row) => {
                let (analyzer, paused, synced): (i32, bool, bool) = (
                    row.try_get(0).map_err(store_error)?,
                    row.try_get(1).map_err(store_error)?,
                    row.try_get(2).map_err(store_error)?,
                );
                if paused {
                    return Ok(Prepared::Paused);
                }
                if analyzer == current {
                    None
                } else {
                    start_over(&tx, current).await?;
                    synced.then_some(Rebuild::Analyzer {
                        was: u32::try_from(analyzer).ok(),
                    })
                }
            }
        };
        let vectors = match semantic_model {
            Some(model) => Some(PgVectors::load(&tx, model).await?),
            None => None,
        };
        tx.commit().await.map_err(store_error)?;
        Ok(Prepared::Ready(rebuilt, vectors))
    }

    pub(crate) fn rebuilt(&self) -> Option<Rebuild> {
        self.rebuilt
    }

    /// Set once `mailgate index pause` is seen for the mailbox: the sync stops at its next
    /// durable point.
    pub(crate) fn pause_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.paused)
    }

    /// A write transaction, fenced by the lease.
    async fn begin(&mut self) -> Result<Transaction<'_>, IndexError> {
        if self.lost.load(Ordering::Relaxed) {
            return Err(IndexError::Busy);
        }
        let tx = self.client.transaction().await.map_err(store_error)?;
        self.lease.fence(&tx).await.map_err(lease_error)?;
        Ok(tx)
    }

    pub(crate) async fn status(&self) -> Result<Option<IndexStatus>, IndexError> {
        let row = self
            .client
            .query_opt(
                "SELECT status::text, paused FROM mailgate_mailboxes
                  WHERE mailbox = current_setting('mailgate.mailbox')",
                &[],
            )
            .await
            .map_err(store_error)?;
        status_of(row)
    }

    pub(crate) async fn write_status(&mut self, status: &IndexStatus) -> Result<(), IndexError> {
        let json = serde_json::to_string(status).map_err(|e| IndexError::Store(e.to_string()))?;
        let tx = self.begin().await?;
        tx.execute(
            "UPDATE mailgate_mailboxes SET status = $1::text::jsonb
              WHERE mailbox = current_setting('mailgate.mailbox')",
            &[&json],
        )
        .await
        .map_err(store_error)?;
        tx.commit().await.map_err(store_error)
    }

    pub(crate) async fn folders(&self) -> Result<Vec<String>, IndexError> {
        let rows = self
            .client
            .query(
                "SELECT folder_id FROM mailgate_folder_state
                  WHERE mailbox = current_setting('mailgate.mailbox')",
                &[],
            )
            .await
            .map_err(store_error)?;
        rows.iter()
            .map(|r| r.try_get(0).map_err(store_error))
            .collect()
    }

    async fn id_map(
        &self,
        table: &str,
        folder: &str,
    ) -> Result<HashMap<String, String>, IndexError> {
        let rows = self
            .client
            .query(
                &format!(
                    "SELECT id, version FROM {table}
                      WHERE mailbox = current_setting('mailgate.mailbox') AND folder_id = $1"
                ),
                &[&folder],
            )
            .await
            .map_err(store_error)?;
        super::two_columns(&rows)
    }

    pub(crate) async fn versions(
        &self,
        folder: &str,
    ) -> Result<HashMap<String, String>, IndexError> {
        self.id_map("mailgate_versions", folder).await
    }

    pub(crate) async fn pending(
        &self,
        folder: &str,
    ) -> Result<HashMap<String, String>, IndexError> {
        self.id_map("mailgate_pending", folder).await
    }

    pub(crate) async fn cursor(&self, folder: &str) -> Result<FolderCursor, IndexError> {
        let row = self
            .client
            .query_opt(
                "SELECT cursor::text FROM mailgate_folder_state
                  WHERE mailbox = current_setting('mailgate.mailbox') AND folder_id = $1",
                &[&folder],
            )
            .await
            .map_err(store_error)?;
        match row {
            None => Ok(FolderCursor::default()),
            Some(row) => {
                let json: String = row.try_get(0).map_err(store_error)?;
                serde_json::from_str(&json).map_err(|e| IndexError::State(e.to_string()))
            }
        }
    }

    pub(crate) async fn seen(&self, folder: &str) -> Result<HashSet<String>, IndexError> {
        let rows = self
            .client
            .query(
                "SELECT id FROM mailgate_seen
                  WHERE mailbox = current_setting('mailgate.mailbox') AND folder_id = $1",
                &[&folder],
            )
            .await
            .map_err(store_error)?;
        rows.iter()
            .map(|r| r.try_get(0).map_err(store_error))
            .collect()
    }

    pub(crate) fn put(&mut self, message: &IndexedMessage) -> Result<(), IndexError> {
        let row = MessageRow::of(message)?;
        if let Some(vectors) = &mut self.vectors {
            vectors.forget(&crate::index::doc_key(&row.folder_id, &row.id));
        }
        self.pending.insert(
            (row.folder_id.clone(), row.id.clone()),
            Pending::Put(Box::new(row)),
        );
        Ok(())
    }

    pub(crate) fn remove(&mut self, folder: &str, id: &str) {
        if let Some(vectors) = &mut self.vectors {
            vectors.forget(&crate::index::doc_key(folder, id));
        }
        self.pending
            .insert((folder.to_owned(), id.to_owned()), Pending::Remove);
    }

    /// Writes what was put and removed and records `batch`, in one transaction.
    pub(crate) async fn commit(&mut self, batch: &StateBatch) -> Result<(), IndexError> {
        let pending = std::mem::take(&mut self.pending);
        let mut vectors = self.vectors.take();
        let written = async {
            let tx = self.begin().await?;
            write_messages(&tx, &pending).await?;
            if let Some(vectors) = &mut vectors {
                vectors.write(&tx).await?;
            }
            apply(&tx, batch).await?;
            tx.commit().await.map_err(store_error)
        }
        .await;
        self.vectors = vectors;
        written
    }

    /// Writes the vectors upserted since the last commit (the fill pass's, without text).
    pub(crate) async fn commit_vectors(&mut self) -> Result<(), IndexError> {
        let mut vectors = self.vectors.take();
        let written = async {
            let Some(vectors) = &mut vectors else {
                return Ok(());
            };
            let tx = self.begin().await?;
            vectors.write(&tx).await?;
            tx.commit().await.map_err(store_error)
        }
        .await;
        self.vectors = vectors;
        written
    }

    pub(crate) fn vectors(&self) -> Option<&PgVectors> {
        self.vectors.as_ref()
    }

    pub(crate) fn vectors_mut(&mut self) -> Option<&mut PgVectors> {
        self.vectors.as_mut()
    }

    pub(crate) async fn record(&mut self, batch: &StateBatch) -> Result<(), IndexError> {
        let tx = self.begin().await?;
        apply(&tx, batch).await?;
        tx.commit().await.map_err(store_error)
    }

    pub(crate) async fn drop_folder(&mut self, folder: &str) -> Result<(), IndexError> {
        let tx = self.begin().await?;
        for table in [
            "mailgate_versions",
            "mailgate_pending",
            "mailgate_seen",
            "mailgate_folder_state",
        ] {
            tx.execute(
                &format!(
                    "DELETE FROM {table}
                      WHERE mailbox = current_setting('mailgate.mailbox') AND folder_id = $1"
                ),
                &[&folder],
            )
            .await
            .map_err(store_error)?;
        }
        tx.commit().await.map_err(store_error)
    }

    /// Stops renewing and gives the lease up, so the next sync need not wait for it to expire.
    pub(crate) async fn close(self) {
        self.stop_renewal.notify_one();
        if let Ok(mut renewer) = self.renewal.await {
            let _ = self.lease.release(&mut renewer).await;
        }
    }
}

enum Prepared {
    Ready(Option<Rebuild>, Option<PgVectors>),
    Paused,
}

/// The status a mailbox's row holds (`None`: never synced), with its pause.
pub(crate) fn status_of(
    row: Option<tokio_postgres::Row>,
) -> Result<Option<IndexStatus>, IndexError> {
    let Some(row) = row else {
        return Ok(None);
    };
    let json: Option<String> = row.try_get(0).map_err(store_error)?;
    let paused: bool = row.try_get(1).map_err(store_error)?;
    let mut status = match json {
        Some(json) => serde_json::from_str::<IndexStatus>(&json)
            .map_err(|e| IndexError::Store(format!("the stored status is unreadable ({e})")))?,
        None if paused => IndexStatus::default(),
        None => return Ok(None),
    };
    status.paused = paused;
    Ok(Some(status))
}

/// Empties the scoped mailbox's index and state, and records the analysis that fills it now.
pub(crate) async fn start_over(tx: &Transaction<'_>, analyzer: i32) -> Result<(), IndexError> {
    // The body chunks first: they would go with their messages (the foreign key cascades), but
    // one statement of the mailbox's removes them at once.
    for table in [
        "mailgate_body_lexemes",
        "mailgate_messages",
        "mailgate_folder_counts",
        "mailgate_versions",
        "mailgate_pending",
        "mailgate_seen",
        "mailgate_folder_state",
    ] {
        tx.execute(
            &format!("DELETE FROM {table} WHERE mailbox = current_setting('mailgate.mailbox')"),
            &[],
        )
        .await
        .map_err(store_error)?;
    }
    tx.execute(
        "UPDATE mailgate_mailboxes
            SET analyzer = $1, status = NULL, docs = 0, field_tokens = '{0,0,0,0,0,0}'
          WHERE mailbox = current_setting('mailgate.mailbox')",
        &[&analyzer],
    )
    .await
    .map_err(store_error)?;
    Ok(())
}

const INSERT_MESSAGE: &str = "INSERT INTO mailgate_messages (mailbox, folder_id, id, received,
    is_read, has_attachments, gap, attachments_unread, internet_message_id, from_raw,
    subject_raw, subject_tokens, from_tokens, recipient_tokens, body_tokens,
    attachment_name_tokens, attachment_text_tokens, field_lengths, repeats, summary)
  VALUES (current_setting('mailgate.mailbox'), $1, $2, $3, $4, $5, $6, $7, $8, $9, $10,
    $11::text::tsvector, $12::text::tsvector, $13::text::tsvector, $14::text::tsvector,
    $15::text::tsvector, $16::text::tsvector, $17, $18::text::jsonb, $19)";

/// A message's body chunks ([`MessageRow::body_chunks`]), numbered from 1, after its row.
const INSERT_BODY_CHUNKS: &str = "INSERT INTO mailgate_body_lexemes (mailbox, folder_id, id, chunk,
    tokens)
  SELECT current_setting('mailgate.mailbox'), $1, $2, n::integer, t::tsvector
    FROM unnest($3::text[]) WITH ORDINALITY AS c(t, n)";

/// Replaces the messages of `pending` (every key touched is deleted, then the puts inserted)
/// and moves the ranking statistics by the difference. A deleted row takes its body chunks and
/// vectors with it (their foreign keys cascade, keyed by the mailbox too), so a message put
/// again keeps none of its old ones.
async fn write_messages(
    tx: &Transaction<'_>,
    pending: &HashMap<(String, String), Pending>,
) -> Result<(), IndexError> {
    if pending.is_empty() {
        return Ok(());
    }
    let (folders, ids): (Vec<&str>, Vec<&str>) = pending
        .keys()
        .map(|(f, i)| (f.as_str(), i.as_str()))
        .unzip();
    let gone = tx
        .query(
            "DELETE FROM mailgate_messages
              WHERE mailbox = current_setting('mailgate.mailbox')
                AND (folder_id, id) IN (SELECT * FROM unnest($1::text[], $2::text[]))
              RETURNING field_lengths, folder_id, gap",
            &[&folders, &ids],
        )
        .await
        .map_err(store_error)?;
    let mut docs: i64 = -i64::try_from(gone.len()).unwrap_or(i64::MAX);
    let mut tokens = [0i64; 6];
    let mut counts: HashMap<(String, i16), i64> = HashMap::new();
    for row in &gone {
        let lengths: Vec<i32> = row.try_get(0).map_err(store_error)?;
        for (t, l) in tokens.iter_mut().zip(lengths) {
            *t -= i64::from(l);
        }
        let key = (
            row.try_get(1).map_err(store_error)?,
            row.try_get(2).map_err(store_error)?,
        );
        *counts.entry(key).or_default() -= 1;
    }
    let insert = tx.prepare(INSERT_MESSAGE).await.map_err(store_error)?;
    let puts: Vec<&MessageRow> = pending
        .values()
        .filter_map(|p| match p {
            Pending::Put(row) => Some(row.as_ref()),
            Pending::Remove => None,
        })
        .collect();
    for row in &puts {
        docs += 1;
        for (t, &l) in tokens.iter_mut().zip(&row.field_lengths) {
            *t += i64::from(l);
        }
        *counts.entry((row.folder_id.clone(), row.gap)).or_default() += 1;
    }
    // Sent together: the connection pipelines them, one round trip for the lot (a long body's
    // chunks follow once its row is in, which their foreign key needs).
    let chunks = if puts.iter().any(|r| !r.body_chunks.is_empty()) {
        Some(tx.prepare(INSERT_BODY_CHUNKS).await.map_err(store_error)?)
    } else {
        None
    };
    futures::future::try_join_all(puts.iter().map(|r| async {
        let l = &r.lexemes;
        let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = vec![
            &r.folder_id,
            &r.id,
            &r.received,
            &r.is_read,
            &r.has_attachments,
            &r.gap,
            &r.attachments_unread,
            &r.internet_message_id,
            &r.from_raw,
            &r.subject_raw,
            &l[0],
            &l[1],
            &l[2],
            &l[3],
            &l[4],
            &l[5],
            &r.field_lengths,
            &r.repeats,
            &r.summary,
        ];
        tx.execute_raw(&insert, params).await?;
        if let Some(chunks) = &chunks
            && !r.body_chunks.is_empty()
        {
            tx.execute(chunks, &[&r.folder_id, &r.id, &r.body_chunks])
                .await?;
        }
        Ok::<_, tokio_postgres::Error>(())
    }))
    .await
    .map_err(store_error)?;
    count_folders(tx, &counts).await?;
    let tokens: Vec<i64> = tokens.to_vec();
    tx.execute(
        "UPDATE mailgate_mailboxes
            SET docs = docs + $1,
                field_tokens = ARRAY(SELECT a + b FROM unnest(field_tokens, $2::bigint[]) AS t(a, b)),
                committed_at = now()
          WHERE mailbox = current_setting('mailgate.mailbox')",
        &[&docs, &tokens],
    )
    .await
    .map_err(store_error)?;
    Ok(())
}

/// Moves the messages counted per folder and content gap by `changes` (an empty count goes).
async fn count_folders(
    tx: &Transaction<'_>,
    changes: &HashMap<(String, i16), i64>,
) -> Result<(), IndexError> {
    let changes: Vec<(&(String, i16), &i64)> = changes.iter().filter(|(_, n)| **n != 0).collect();
    if changes.is_empty() {
        return Ok(());
    }
    let folders: Vec<&str> = changes.iter().map(|((f, _), _)| f.as_str()).collect();
    let gaps: Vec<i16> = changes.iter().map(|((_, g), _)| *g).collect();
    let deltas: Vec<i64> = changes.iter().map(|(_, n)| **n).collect();
    tx.execute(
        "INSERT INTO mailgate_folder_counts (mailbox, folder_id, gap, messages)
         SELECT current_setting('mailgate.mailbox'), f, g, n
           FROM unnest($1::text[], $2::int2[], $3::int8[]) AS t(f, g, n)
         ON CONFLICT (mailbox, folder_id, gap)
         DO UPDATE SET messages = mailgate_folder_counts.messages + EXCLUDED.messages",
        &[&folders, &gaps, &deltas],
    )
    .await
    .map_err(store_error)?;
    tx.execute(
        "DELETE FROM mailgate_folder_counts
          WHERE mailbox = current_setting('mailgate.mailbox') AND messages = 0",
        &[],
    )
    .await
    .map_err(store_error)?;
    Ok(())
}

/// The last of each id: a batch may name one twice, and the local store keeps the last.
fn last_of(pairs: &[(String, String)]) -> (Vec<&str>, Vec<&str>) {
    let mut seen = HashMap::new();
    for (id, version) in pairs {
        seen.insert(id.as_str(), version.as_str());
    }
    seen.into_iter().unzip()
}

/// Sets each id's version in `table` (`mailgate_versions` or `mailgate_pending`), the last one
/// `pairs` names as the local store keeps it; returns the ids.
async fn upsert_versions<'a>(
    tx: &Transaction<'_>,
    table: &str,
    folder: &str,
    pairs: &'a [(String, String)],
) -> Result<Vec<&'a str>, IndexError> {
    let (ids, versions) = last_of(pairs);
    let sql = format!(
        "INSERT INTO {table} (mailbox, folder_id, id, version)
         SELECT current_setting('mailgate.mailbox'), $1, i, v
           FROM unnest($2::text[], $3::text[]) AS t(i, v)
         ON CONFLICT (mailbox, folder_id, id) DO UPDATE SET version = EXCLUDED.version"
    );
    tx.execute(&sql, &[&folder, &ids, &versions])
        .await
        .map_err(store_error)?;
    Ok(ids)
}

/// Records one step of the sync, in the order the local store applies it.
async fn apply(tx: &Transaction<'_>, batch: &StateBatch) -> Result<(), IndexError> {
    let folder = batch.folder.as_str();
    let exec = async |sql: &str, params: &[&(dyn tokio_postgres::types::ToSql + Sync)]| {
        tx.execute(sql, params).await.map_err(store_error)
    };
    if !batch.indexed.is_empty() {
        let ids = upsert_versions(tx, "mailgate_versions", folder, &batch.indexed).await?;
        exec(
            "DELETE FROM mailgate_pending
              WHERE mailbox = current_setting('mailgate.mailbox')
                AND folder_id = $1 AND id = ANY($2)",
            &[&folder, &ids],
        )
        .await?;
    }
    if !batch.removed.is_empty() {
        for sql in [
            "DELETE FROM mailgate_versions
              WHERE mailbox = current_setting('mailgate.mailbox')
                AND folder_id = $1 AND id = ANY($2)",
            "DELETE FROM mailgate_pending
              WHERE mailbox = current_setting('mailgate.mailbox')
                AND folder_id = $1 AND id = ANY($2)",
        ] {
            exec(sql, &[&folder, &batch.removed]).await?;
        }
    }
    if !batch.pending.is_empty() {
        upsert_versions(tx, "mailgate_pending", folder, &batch.pending).await?;
    }
    if batch.clear_seen {
        exec(
            "DELETE FROM mailgate_seen
              WHERE mailbox = current_setting('mailgate.mailbox') AND folder_id = $1",
            &[&folder],
        )
        .await?;
    }
    if !batch.seen.is_empty() {
        exec(
            "INSERT INTO mailgate_seen (mailbox, folder_id, id)
             SELECT current_setting('mailgate.mailbox'), $1, i FROM unnest($2::text[]) AS t(i)
             ON CONFLICT DO NOTHING",
            &[&folder, &batch.seen],
        )
        .await?;
    }
    if let Some(cursor) = &batch.cursor {
        let json = serde_json::to_string(cursor).map_err(|e| IndexError::State(e.to_string()))?;
        exec(
            "INSERT INTO mailgate_folder_state (mailbox, folder_id, cursor)
             VALUES (current_setting('mailgate.mailbox'), $1, $2::text::jsonb)
             ON CONFLICT (mailbox, folder_id) DO UPDATE SET cursor = EXCLUDED.cursor",
            &[&folder, &json],
        )
        .await?;
    }
    Ok(())
}

/// How often the renewal task renews the lease and looks for a pause, at most.
const RENEW_EVERY: Duration = Duration::from_secs(5);

/// What the renewal task tells the writer, and how the writer stops it.
struct Renewal {
    ttl: Duration,
    lost: Arc<AtomicBool>,
    paused: Arc<AtomicBool>,
    stop: Arc<tokio::sync::Notify>,
}

/// Renews the lease and looks for a pause until told to stop (then hands its connection
/// back); a renewal that finds the lease lost marks it, and every later write fails.
async fn renew(mut client: Client, lease: Lease, to: Renewal) -> Client {
    loop {
        tokio::select! {
            () = to.stop.notified() => return client,
            () = tokio::time::sleep(RENEW_EVERY.min(to.ttl / 3)) => {}
        }
        match lease.renew(&mut client, to.ttl).await {
            Ok(()) => {}
            Err(LeaseError::Lost) => {
                to.lost.store(true, Ordering::Relaxed);
                return client;
            }
            // A failed renewal is tried again; the fence decides whether writes may go on.
            Err(LeaseError::Store(_)) => {}
        }
        if let Ok(Some(row)) = client
            .query_opt(
                "SELECT paused FROM mailgate_mailboxes
                  WHERE mailbox = current_setting('mailgate.mailbox')",
                &[],
            )
            .await
            && row.try_get::<_, bool>(0).unwrap_or(false)
        {
            to.paused.store(true, Ordering::Relaxed);
        }
    }
}
