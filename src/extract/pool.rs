//! The server side of extraction: every attachment the server reads is parsed in a separate
//! worker process (`extract::worker`, the same binary re-executed), one process per job, at most
//! `maxConcurrentExtractions` at a time (the caller's semaphore permit travels with the job).
//! A fresh process per job means one attachment can never see another's bytes or inherit a
//! parser's corrupted state; it costs a process start (measured in `benches/extract.rs`). The
//! worker gets an empty environment and only its pipes, a wall-clock limit
//! ([`EXTRACTION_TIMEOUT`]) after which it is killed, and whatever it does — answer, crash,
//! hit a limit, hang — becomes a typed [`SlotError`] while the server keeps serving.

use std::os::unix::process::ExitStatusExt as _;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::OwnedSemaphorePermit;

use super::job::{self, Answer, Job, Reply, Request};
use super::{Caps, ExtractError};

/// One extraction's wall-clock limit in the server.
pub(crate) const EXTRACTION_TIMEOUT: Duration = Duration::from_secs(30);

/// The most reply bytes read from a worker: the longest header line and the largest raw entry
/// (`maxRawAttachmentBytes` is at most 1 MiB).
const MAX_REPLY_BYTES: u64 = job::MAX_HEADER_BYTES + (2 << 20);

/// Why a job produced no answer.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum SlotError {
    /// [`EXTRACTION_TIMEOUT`] passed first; the worker was killed.
    TimedOut,
    /// The worker ended on its CPU or memory limit.
    LimitExceeded,
    /// The worker crashed, could not start, or answered nonsense.
    Stopped,
    /// The extractor refused or failed.
    Extract(ExtractError),
}

/// Runs extraction jobs.
#[derive(Debug)]
pub(crate) struct Extractor {
    program: Program,
    timeout: Duration,
}

#[derive(Debug)]
enum Program {
    /// Spawn `path args…`, write the request to its stdin, read the reply from its stdout.
    Process {
        path: std::path::PathBuf,
        args: Vec<String>,
    },
    /// Unit tests run the jobs in-process: their binary is the test harness, which has no worker
    /// subcommand. Integration tests drive the real binary, so the worker path is tested there.
    #[cfg(test)]
    InProcess,
}

impl Extractor {
    /// The worker: this very binary (`/proc/self/exe`, so an upgrade of the file on disk during
    /// the server's life never mixes versions), with the worker subcommand.
    pub(crate) fn worker() -> Self {
        #[cfg(test)]
        let program = Program::InProcess;
        #[cfg(not(test))]
        let program = Program::Process {
            path: "/proc/self/exe".into(),
            args: vec![super::worker::SUBCOMMAND.to_owned()],
        };
        Self {
            program,
            timeout: EXTRACTION_TIMEOUT,
        }
    }

    /// Does `job` on `bytes`, holding `slot` until the worker has ended.
    pub(crate) async fn run(
        &self,
        slot: OwnedSemaphorePermit,
        job: Job,
        bytes: Vec<u8>,
        caps: Caps,
    ) -> Result<Answer, SlotError> {
        let _slot = slot;
        match &self.program {
            Program::Process { path, args } => {
                run_process(path, args, self.timeout, job, bytes, caps).await
            }
            #[cfg(test)]
            Program::InProcess => {
                let work = tokio::task::spawn_blocking(move || job::run(&job, &bytes, &caps));
                match tokio::time::timeout(self.timeout, work).await {
                    Err(_) => Err(SlotError::TimedOut),
                    Ok(Err(_)) => Err(SlotError::Stopped),
                    Ok(Ok(result)) => result.map_err(SlotError::Extract),
                }
            }
        }
    }
}

async fn run_process(
    path: &std::path::Path,
    args: &[String],
    timeout: Duration,
    job: Job,
    bytes: Vec<u8>,
    caps: Caps,
) -> Result<Answer, SlotError> {
    let mut child = tokio::process::Command::new(path)
        .args(args)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| {
            tracing::warn!(error = %e.kind(), "the extraction worker could not start");
            SlotError::Stopped
        })?;
    let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(SlotError::Stopped);
    };
    let request = Request {
        job,
        caps,
        len: bytes.len() as u64,
    };
    let mut head = serde_json::to_vec(&request).map_err(|_| SlotError::Stopped)?;
    head.push(b'\n');
    let work = async {
        let write = async move {
            // A worker that ends early closes the pipe: what it said, or how it ended, tells why.
            let _ = stdin.write_all(&head).await;
            let _ = stdin.write_all(&bytes).await;
        };
        let read = async move {
            let mut out = Vec::new();
            let read = stdout.take(MAX_REPLY_BYTES).read_to_end(&mut out).await;
            read.map(|_| out)
        };
        let ((), out) = tokio::join!(write, read);
        (out, child.wait().await)
    };
    let outcome = tokio::time::timeout(timeout, work).await;
    let Ok((out, status)) = outcome else {
        let _ = child.kill().await;
        return Err(SlotError::TimedOut);
    };
    let status = status.map_err(|_| SlotError::Stopped)?;
    if let Some(answer) = out.ok().and_then(|out| parse_reply(&out))
        && status.success()
    {
        return answer.map_err(SlotError::Extract);
    }
    Err(classify_exit(status))
}

/// The answer in a worker's output, if it wrote a whole, well-formed reply.
fn parse_reply(out: &[u8]) -> Option<Result<Answer, ExtractError>> {
    let mut input = out;
    let reply: Reply = job::read_line(&mut input).ok()?;
    let answer = match reply {
        Reply::Text(text) => Ok(Answer::Text(text)),
        Reply::Listing(listing) => Ok(Answer::Listing(listing)),
        Reply::Raw { len } => Ok(Answer::Raw(
            job::read_payload(&mut input, len, MAX_REPLY_BYTES).ok()?,
        )),
        Reply::Error(e) => Err(e),
    };
    input.is_empty().then_some(answer)
}

/// How a worker that gave no answer ended.
fn classify_exit(status: std::process::ExitStatus) -> SlotError {
    const SIGABRT: i32 = 6;
    const SIGXCPU: i32 = 24;
    match (status.signal(), status.code()) {
        // The CPU limit, and an allocation past the address-space limit (Rust aborts).
        (Some(SIGXCPU | SIGABRT), _) => SlotError::LimitExceeded,
        (_, Some(super::worker::EXIT_REFUSED_START)) => {
            // It could not close what it inherited or set its limits: say so, loudly.
            tracing::error!(
                "the extraction worker refused to start: it could not lock itself down"
            );
            SlotError::Stopped
        }
        _ => SlotError::Stopped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extract::Extracted;

    fn shell(script: &str, timeout: Duration) -> Extractor {
        Extractor {
            program: Program::Process {
                path: "/bin/sh".into(),
                args: vec!["-c".into(), script.into()],
            },
            timeout,
        }
    }

    async fn run(extractor: &Extractor) -> Result<Answer, SlotError> {
        let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(1));
        let slot = slots.try_acquire_owned().expect("free");
        let job = Job::Text {
            name: Some("a.txt".into()),
            content_type: "text/plain".into(),
        };
        extractor
            .run(slot, job, b"hello".to_vec(), Caps::default())
            .await
    }

    /// A worker that reads its request and answers like the real one.
    const ANSWERS: &str = r#"cat >/dev/null; printf '%s\n' '{"text":{"text":"hi","truncated":false,"extractor":"text","unread_parts":0}}'"#;

    #[tokio::test]
    async fn a_well_formed_reply_is_the_answer() {
        let answer = run(&shell(ANSWERS, EXTRACTION_TIMEOUT)).await;
        assert_eq!(
            answer,
            Ok(Answer::Text(Extracted {
                text: "hi".into(),
                truncated: false,
                extractor: "text",
                unread_parts: 0,
            }))
        );
    }

    #[tokio::test]
    async fn every_way_a_worker_can_fail_is_typed_and_the_next_job_still_runs() {
        let cases = [
            // Killed mid-job (by anyone): a crash.
            ("kill -KILL $$", SlotError::Stopped),
            ("kill -SEGV $$", SlotError::Stopped),
            // Its CPU limit, and an allocation past its address-space limit.
            ("kill -XCPU $$", SlotError::LimitExceeded),
            ("kill -ABRT $$", SlotError::LimitExceeded),
            // Garbage, a reply cut short, a good reply with a failing exit, silence.
            ("cat >/dev/null; echo garbage", SlotError::Stopped),
            ("cat >/dev/null; printf '{\"text\":'", SlotError::Stopped),
            (&format!("{ANSWERS}; exit 3"), SlotError::Stopped),
            ("exit 0", SlotError::Stopped),
            ("exit 70", SlotError::Stopped),
        ];
        for (script, expected) in cases {
            assert_eq!(
                run(&shell(script, EXTRACTION_TIMEOUT)).await,
                Err(expected),
                "{script}"
            );
            assert!(run(&shell(ANSWERS, EXTRACTION_TIMEOUT)).await.is_ok());
        }
    }

    #[tokio::test]
    async fn a_hung_worker_is_killed_at_the_timeout() {
        // `exec` so the shell's own pid is the sleeper that must be killed.
        let started = std::time::Instant::now();
        let answer = run(&shell("exec sleep 600", Duration::from_millis(300))).await;
        assert_eq!(answer, Err(SlotError::TimedOut));
        assert!(started.elapsed() < Duration::from_secs(60));
    }

    #[tokio::test]
    async fn a_missing_worker_binary_is_a_failure() {
        let extractor = Extractor {
            program: Program::Process {
                path: "/nonexistent/mailgate".into(),
                args: Vec::new(),
            },
            timeout: EXTRACTION_TIMEOUT,
        };
        assert_eq!(run(&extractor).await, Err(SlotError::Stopped));
    }
}
