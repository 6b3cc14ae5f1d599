//! The extraction worker: the child side of `extract::pool`. The server re-executes its own
//! binary as `mailgate __extract-worker` with an empty environment, stdin and stdout as pipes and
//! stderr on /dev/null; [`main`] first makes sure that is all it holds (it closes any other
//! descriptor it inherited — a client may start mailgate with descriptors it never marked
//! close-on-exec — and refuses to work if that fails or an environment variable is set), then
//! locks itself down — address space, CPU
//! time, no new files or sockets (`RLIMIT_NOFILE` 3), no file writes, no core dumps, no
//! privilege gain — and only then reads one [`Request`], runs it through [`job::run`] and writes
//! one [`Reply`]. A parser bug in here can therefore read no secret and reach no socket, and a
//! crash, a runaway loop or an allocation storm ends this process, not the server.

use std::io::{BufReader, Write as _};

use rustix::process::{Resource, Rlimit, setrlimit};

use super::job::{self, Reply, Request};

/// The hidden subcommand that runs [`main`].
pub(crate) const SUBCOMMAND: &str = "__extract-worker";

/// Address space a worker may map: the binary, a 50 MiB attachment (the largest
/// `maxAttachmentInputBytes`), and room for the parsers' own structures. Past it, allocation
/// fails and the process aborts: the server reports `LIMIT_EXCEEDED`.
pub(crate) const MAX_ADDRESS_SPACE: u64 = 1 << 30;

/// CPU seconds a worker may use; the server's wall-clock limit (`EXTRACTION_TIMEOUT`, 30 s)
/// normally ends it first, this bounds a worker the server could not kill.
const MAX_CPU_SECONDS: u64 = 60;

/// Exit codes the server tells apart from a crash: the worker could not shed what it inherited
/// or lock itself down, or its request was malformed.
pub(crate) const EXIT_REFUSED_START: i32 = 70;
pub(crate) const EXIT_BAD_REQUEST: i32 = 71;

/// Runs one job read from stdin; the process exit code.
pub(crate) fn main() -> i32 {
    if !started_clean() || lock_down().is_err() {
        return EXIT_REFUSED_START;
    }
    let mut input = BufReader::new(std::io::stdin().lock());
    let request: Request = match job::read_line(&mut input) {
        Ok(request) => request,
        Err(_) => return EXIT_BAD_REQUEST,
    };
    let Ok(bytes) = job::read_payload(&mut input, request.len, MAX_ADDRESS_SPACE / 4) else {
        return EXIT_BAD_REQUEST;
    };
    // Parsers of hostile bytes can panic; a caught panic is an ordinary failed extraction.
    let result = std::panic::catch_unwind(|| job::run(&request.job, &bytes, &request.caps))
        .unwrap_or(Err(super::ExtractError::Failed));
    drop(bytes);
    let (reply, payload) = Reply::from_result(result);
    let mut out = std::io::stdout().lock();
    match job::write_framed(&mut out, &reply, &payload).and_then(|()| out.flush()) {
        Ok(()) => 0,
        Err(_) => EXIT_BAD_REQUEST,
    }
}

/// Closes every inherited descriptor beyond stdin, stdout and stderr; whether the process then
/// holds only those and no environment.
#[expect(
    clippy::disallowed_methods,
    reason = "the worker reads no variable: it only checks that there is none"
)]
fn started_clean() -> bool {
    if std::env::vars_os().next().is_some() {
        return false;
    }
    let Some(inherited) = descriptors() else {
        return false;
    };
    for fd in inherited.into_iter().filter(|fd| *fd > 2) {
        // The listing's own descriptor is already closed (EBADF): nothing to check there.
        let _ = nix::unistd::close(fd);
    }
    // Listing again opens one descriptor, which takes the lowest free number: 3.
    descriptors().is_some_and(|left| left.iter().all(|fd| *fd <= 3))
}

/// The open descriptor numbers, from `/proc/self/fd`.
#[expect(
    clippy::disallowed_methods,
    reason = "a fixed kernel path listed for descriptor numbers, never a caller's path"
)]
fn descriptors() -> Option<Vec<i32>> {
    let mut fds = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd").ok()? {
        fds.push(entry.ok()?.file_name().to_str()?.parse().ok()?);
    }
    Some(fds)
}

/// Sets the limits, hard and soft alike so they cannot be raised again.
fn lock_down() -> rustix::io::Result<()> {
    let limit = |resource, value: u64| {
        setrlimit(
            resource,
            Rlimit {
                current: Some(value),
                maximum: Some(value),
            },
        )
    };
    rustix::thread::set_no_new_privs(true)?;
    limit(Resource::As, MAX_ADDRESS_SPACE)?;
    limit(Resource::Cpu, MAX_CPU_SECONDS)?;
    limit(Resource::Core, 0)?;
    limit(Resource::Fsize, 0)?;
    // Last: tests take it as the sign that the worker is locked down.
    limit(Resource::Nofile, 3)
}
