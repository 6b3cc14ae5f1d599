//! A small pool of authenticated connections to one mailbox's IMAP server.
//!
//! At most [`MAX_CONNECTIONS`] connections are in use at once per account (a server allows each
//! user a handful: Dovecot 10 per IP by default, Gmail 15 per account): the slots are the
//! account's ([`AccountLimits`]), shared by every alias that logs in as it. When instances share
//! the slots (a shared database), no connection is kept between operations: an idle one would
//! hold no slot, so N instances could keep N more open than the provider allows. A connection returns to the
//! pool only when the operation that held it finished with the protocol in step: one dropped
//! mid-command (a cancelled call, a deadline) or failed on the wire is closed instead, so a
//! half-read answer can never be read as the next command's. An idle connection older than
//! [`IDLE_TIMEOUT`] is closed rather than reused (servers log idle clients out, and a silently
//! dropped one would cost the next call a failed command). A read that fails because a reused
//! connection had died is retried once on a new connection; a write never is, since a write the
//! server may already have done must not be done twice.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::conn::{self, Endpoint, ImapSession, ServerCaps};
use crate::backends::BackendError;
use crate::coordination::upstream::AccountLimits;

/// Connections one account may have in use at once.
pub(crate) const MAX_CONNECTIONS: usize = 2;
/// How long a connection may sit unused and still be reused.
const IDLE_TIMEOUT: Duration = Duration::from_secs(240);

/// The folder a connection has open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Selected {
    /// The folder's wire name (modified UTF-7).
    pub(crate) name: String,
    /// Opened with `SELECT` (writes allowed), not `EXAMINE`.
    pub(crate) writable: bool,
    pub(crate) uid_validity: u32,
}

/// One authenticated connection and what is known about its state.
pub(crate) struct Conn {
    pub(crate) session: ImapSession,
    pub(crate) caps: ServerCaps,
    pub(crate) selected: Option<Selected>,
    /// A command failed on the wire after the operation had results to keep (a scan cut short):
    /// the operation succeeds with what it read, and the connection is closed, not pooled.
    pub(crate) poisoned: bool,
}

/// A failure inside an operation: the protocol library's (which may mean the connection is
/// gone) or a backend class decided by the operation itself.
#[derive(Debug)]
pub(crate) enum OpError {
    Imap(async_imap::error::Error),
    Backend(BackendError),
}

impl From<async_imap::error::Error> for OpError {
    fn from(error: async_imap::error::Error) -> Self {
        OpError::Imap(error)
    }
}

impl From<BackendError> for OpError {
    fn from(error: BackendError) -> Self {
        OpError::Backend(error)
    }
}

impl From<std::io::Error> for OpError {
    fn from(error: std::io::Error) -> Self {
        OpError::Imap(async_imap::error::Error::Io(error))
    }
}

impl OpError {
    pub(crate) fn is_broken(&self) -> bool {
        match self {
            OpError::Imap(e) => conn::is_broken(e),
            // Our own deadline cut a command short: its answer may still be on the wire.
            OpError::Backend(BackendError::Timeout) => true,
            OpError::Backend(_) => false,
        }
    }

    pub(crate) fn into_backend(self) -> BackendError {
        match self {
            OpError::Imap(e) => conn::classify(&e),
            OpError::Backend(e) => e,
        }
    }
}

/// Whether an operation may run again on a new connection when a reused one turns out dead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Repeat {
    /// A read: running it twice changes nothing.
    Safe,
    /// A write: the server may have done it before the connection died.
    Never,
}

struct Idle {
    conn: Conn,
    since: Instant,
}

/// The pool of one mailbox.
pub(crate) struct Pool {
    endpoint: Endpoint,
    idle: Mutex<Vec<Idle>>,
    /// The account's limits: its connection slots.
    account: Arc<AccountLimits>,
}

/// A connection lent to one operation; it goes back to the pool on drop only when `clean`.
pub(crate) struct Lease<'a> {
    pool: &'a Pool,
    conn: Option<Conn>,
    reused: bool,
    clean: bool,
    _slot: crate::coordination::upstream::Entered<'a>,
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take()
            && self.clean
            && !self.pool.account.counted_across_instances()
            && let Ok(mut idle) = self.pool.idle.lock()
        {
            idle.push(Idle {
                conn,
                since: Instant::now(),
            });
        }
    }
}

impl Pool {
    pub(crate) fn new(endpoint: Endpoint, account: Arc<AccountLimits>) -> Self {
        Self {
            endpoint,
            idle: Mutex::new(Vec::new()),
            account,
        }
    }

    pub(crate) async fn lease(
        &self,
        deadline: Instant,
        fresh: bool,
    ) -> Result<Lease<'_>, BackendError> {
        let deadline = tokio::time::Instant::from_std(deadline);
        let slot = tokio::time::timeout_at(deadline, self.account.enter())
            .await
            .map_err(|_| BackendError::Timeout)?
            .map_err(|_| BackendError::Unavailable)?;
        let reusable = if fresh { None } else { self.take_idle() };
        let (conn, reused) = match reusable {
            Some(conn) => (conn, true),
            None => {
                let (session, caps) = tokio::time::timeout_at(deadline, self.endpoint.connect())
                    .await
                    .unwrap_or(Err(BackendError::Timeout))?;
                let conn = Conn {
                    session,
                    caps,
                    selected: None,
                    poisoned: false,
                };
                (conn, false)
            }
        };
        Ok(Lease {
            pool: self,
            conn: Some(conn),
            reused,
            clean: false,
            _slot: slot,
        })
    }

    fn take_idle(&self) -> Option<Conn> {
        let mut idle = self.idle.lock().ok()?;
        while let Some(mut entry) = idle.pop() {
            if entry.since.elapsed() < IDLE_TIMEOUT {
                // Each operation opens its folder afresh: SELECT/EXAMINE is what reports the
                // folder's current UIDVALIDITY, which an id must be checked against, and the
                // folder may have been reset since the last operation.
                entry.conn.selected = None;
                return Some(entry.conn);
            }
            // Too old to trust: dropped (closing the socket) rather than logged out politely.
        }
        None
    }
}

impl Lease<'_> {
    /// The leased connection (present from `lease` until drop).
    pub(crate) fn conn(&mut self) -> Option<&mut Conn> {
        self.conn.as_mut()
    }

    /// Ends the operation that held this lease with `outcome`. A connection whose command
    /// failed on the wire, or that the operation left mid-command, is closed; a `Safe`
    /// operation that failed that way on a reused connection is to run once more on a new one
    /// (`None`; `fresh` is then set).
    pub(crate) fn settle<T>(
        mut self,
        outcome: Result<T, OpError>,
        repeat: Repeat,
        fresh: &mut bool,
        deadline: Instant,
    ) -> Option<Result<T, BackendError>> {
        let poisoned = self.conn.as_ref().is_none_or(|c| c.poisoned);
        match outcome {
            Ok(value) => {
                self.clean = !poisoned;
                Some(Ok(value))
            }
            Err(error) if error.is_broken() => {
                // `clean` stays false: the connection is closed on drop.
                let retry = self.reused && repeat == Repeat::Safe && !*fresh;
                drop(self);
                if retry && Instant::now() < deadline {
                    *fresh = true;
                    return None;
                }
                Some(Err(error.into_backend()))
            }
            Err(error) => {
                // A tagged NO/BAD or a decision of the operation: the protocol is in step.
                self.clean = !poisoned;
                Some(Err(error.into_backend()))
            }
        }
    }
}

/// Runs `$body` (an expression of type `Result<T, OpError>` that may use `$conn: &mut Conn`)
/// on a pooled connection of `$pool` by `$deadline`, as [`Lease::settle`] says; evaluates to
/// `Result<T, BackendError>`. A macro rather than a method taking an async closure, because
/// the futures of the `MailStore` methods must be `Send` and an async closure's borrowed future
/// cannot yet be proven so.
macro_rules! with_conn {
    ($pool:expr, $deadline:expr, $repeat:expr, |$conn:ident| $body:block) => {{
        let deadline: std::time::Instant = $deadline;
        let mut fresh = false;
        loop {
            let mut lease = match $pool.lease(deadline, fresh).await {
                Ok(lease) => lease,
                Err(e) => break Err(e),
            };
            let outcome = match lease.conn() {
                Some($conn) => {
                    tokio::time::timeout_at(tokio::time::Instant::from_std(deadline), async $body)
                        .await
                        .unwrap_or(Err($crate::backends::imap::pool::OpError::Backend(
                            $crate::backends::BackendError::Timeout,
                        )))
                }
                None => Err($crate::backends::imap::pool::OpError::Backend(
                    $crate::backends::BackendError::Unavailable,
                )),
            };
            if let Some(result) = lease.settle(outcome, $repeat, &mut fresh, deadline) {
                break result;
            }
        }
    }};
}
pub(crate) use with_conn;
