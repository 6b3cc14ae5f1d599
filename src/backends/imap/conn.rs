//! One authenticated IMAP connection: TCP, then implicit TLS, STARTTLS or (to a loopback host
//! only) nothing, then `LOGIN` or `AUTHENTICATE XOAUTH2`, then the server's capabilities.
//!
//! Invariants:
//! - Certificates are always verified: against the web PKI roots plus the mailbox's `caFile`.
//!   There is no switch that accepts any certificate (a private server's CA goes in `caFile`).
//! - STARTTLS: nothing but the greeting and the `STARTTLS` exchange travels in the clear, and
//!   whatever the server sent after its `OK` before the handshake is dropped with the plain
//!   connection (the classic STARTTLS response-injection attack).
//! - `plain` is refused here too unless the host is a loopback address (the config refuses it
//!   first; a second check costs nothing).
//! - The credential is handed to the protocol library and never formatted; errors are classes
//!   ([`BackendError`]), never the server's text, which may echo the user name.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use async_imap::{Client, Session};
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_rustls::rustls;
use tokio_util::either::Either;

use super::shield::Shield;
use crate::backends::BackendError;
use crate::config::Security;
use crate::config::env::Secret;
use crate::config::imap::ImapLogin;

/// The byte stream under a session: plain TCP (loopback only) or TLS, every byte read checked
/// by the parser shield ([`super::shield`]) before the protocol parser sees it.
pub(crate) type Stream = Shield<Either<TcpStream, TlsStream<TcpStream>>>;
/// An authenticated session.
pub(crate) type ImapSession = Session<Stream>;

/// How long connecting, the TLS handshake and the login may take together.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// Why the connection settings of a mailbox were refused at startup.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ImapSetupError {
    #[error("the imap caFile holds no usable PEM certificate")]
    CaFile,
    #[error("the imap host is not a valid TLS server name")]
    ServerName,
    #[error("the TLS settings could not be built")]
    Tls,
    #[error("plain IMAP is only allowed to a loopback host")]
    PlainNotLoopback,
}

/// What the server said it can do, read once per connection after login.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ServerCaps {
    /// RFC 6851 `MOVE`: without it a move is refused, never emulated.
    pub(crate) r#move: bool,
    /// RFC 4315 `UIDPLUS`: `APPENDUID` / `COPYUID` name the new messages.
    pub(crate) uidplus: bool,
    /// RFC 7162 `CONDSTORE` (or `QRESYNC`, which implies it): per-message mod-sequences, so the
    /// change feed can ask for what changed instead of listing every message's flags.
    pub(crate) condstore: bool,
}

/// Everything needed to open a connection to one mailbox's IMAP server.
pub(crate) struct Endpoint {
    host: String,
    port: u16,
    security: Security,
    server_name: ServerName<'static>,
    tls: TlsConnector,
    user: String,
    login: ImapLogin,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Host and port only: the user name is an address and the login a secret.
        f.debug_struct("Endpoint")
            .field("host", &self.host)
            .field("port", &self.port)
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// Checks the settings of one `imap` block: `user` is the block's user name or the mailbox
    /// address, `ca_pem` the contents of its `caFile`.
    pub(crate) fn new(
        host: &str,
        port: u16,
        security: Security,
        user: String,
        login: ImapLogin,
        ca_pem: Option<&[u8]>,
    ) -> Result<Self, ImapSetupError> {
        if security == Security::Plain && !is_loopback(host) {
            return Err(ImapSetupError::PlainNotLoopback);
        }
        let server_name =
            ServerName::try_from(host.to_owned()).map_err(|_| ImapSetupError::ServerName)?;
        let roots = tls_roots(ca_pem).map_err(|()| ImapSetupError::CaFile)?;
        let config = tls_client_config(roots).map_err(|()| ImapSetupError::Tls)?;
        Ok(Self {
            host: host.to_owned(),
            port,
            security,
            server_name,
            tls: TlsConnector::from(Arc::new(config)),
            user,
            login,
        })
    }

    /// Opens, secures and authenticates one connection, within [`CONNECT_TIMEOUT`].
    pub(crate) async fn connect(&self) -> Result<(ImapSession, ServerCaps), BackendError> {
        tokio::time::timeout(CONNECT_TIMEOUT, self.connect_unbounded())
            .await
            .unwrap_or(Err(BackendError::Timeout))
    }

    async fn connect_unbounded(&self) -> Result<(ImapSession, ServerCaps), BackendError> {
        let tcp = TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|_| BackendError::Unavailable)?;
        // Commands are small and each waits for its answer: Nagle would only add latency.
        tcp.set_nodelay(true)
            .map_err(|_| BackendError::Unavailable)?;
        let mut client = match self.security {
            Security::Tls => Client::new(Shield::new(Either::Right(self.handshake(tcp).await?))),
            Security::Plain => Client::new(Shield::new(Either::Left(tcp))),
            Security::Starttls => {
                let mut plain = Client::new(Shield::new(Either::Left(tcp)));
                greeting(&mut plain).await?;
                plain
                    .run_command_and_check_ok("STARTTLS", None)
                    .await
                    .map_err(|e| classify(&e))?;
                let Either::Left(tcp) = plain.into_inner().into_inner() else {
                    return Err(BackendError::Malformed);
                };
                // No greeting follows the handshake; the session starts at once.
                let secured = Client::new(Shield::new(Either::Right(self.handshake(tcp).await?)));
                return self.authenticate(secured).await;
            }
        };
        greeting(&mut client).await?;
        self.authenticate(client).await
    }

    async fn handshake(&self, tcp: TcpStream) -> Result<TlsStream<TcpStream>, BackendError> {
        self.tls
            .connect(self.server_name.clone(), tcp)
            .await
            .map_err(|e| {
                // The operator's clue (an untrusted certificate: set caFile); metadata only.
                tracing::warn!(host = %self.host, port = self.port, error = %e, "IMAP TLS handshake failed");
                BackendError::Unavailable
            })
    }

    async fn authenticate(
        &self,
        client: Client<Stream>,
    ) -> Result<(ImapSession, ServerCaps), BackendError> {
        let session = match &self.login {
            ImapLogin::Password(password) => client
                .login(&self.user, password.expose())
                .await
                .map_err(|(e, _)| login_error(&e))?,
            ImapLogin::OAuth2(token) => client
                .authenticate(
                    "XOAUTH2",
                    XOauth2 {
                        user: &self.user,
                        token,
                    },
                )
                .await
                .map_err(|(e, _)| login_error(&e))?,
        };
        let mut session = session;
        let capabilities = session.capabilities().await.map_err(|e| classify(&e))?;
        let caps = ServerCaps {
            r#move: capabilities.has_str("MOVE"),
            uidplus: capabilities.has_str("UIDPLUS"),
            condstore: capabilities.has_str("CONDSTORE") || capabilities.has_str("QRESYNC"),
        };
        Ok((session, caps))
    }
}

/// Reads the server's greeting (`* OK`); `* BYE` or a closed stream is an unavailable server.
async fn greeting(client: &mut Client<Stream>) -> Result<(), BackendError> {
    match client.read_response().await {
        Ok(Some(response)) => match response.parsed() {
            imap_proto::Response::Data {
                status: imap_proto::Status::Ok,
                ..
            } => Ok(()),
            _ => Err(BackendError::Unavailable),
        },
        _ => Err(BackendError::Unavailable),
    }
}

/// The SASL XOAUTH2 initial response (`user=…^Aauth=Bearer …^A^A`); async-imap base64-encodes it.
struct XOauth2<'a> {
    user: &'a str,
    token: &'a Secret,
}

impl async_imap::Authenticator for XOauth2<'_> {
    type Response = String;

    fn process(&mut self, challenge: &[u8]) -> String {
        if challenge.is_empty() {
            format!(
                "user={}\x01auth=Bearer {}\x01\x01",
                self.user,
                self.token.expose()
            )
        } else {
            // A non-empty challenge is the server's JSON error; the empty answer ends the
            // exchange so the tagged NO arrives.
            String::new()
        }
    }
}

/// A failed login: refused credentials, or a connection that failed during it.
fn login_error(error: &async_imap::error::Error) -> BackendError {
    match error {
        async_imap::error::Error::No(_) | async_imap::error::Error::Bad(_) => {
            BackendError::Unauthorised
        }
        // The password holds CR or LF: it cannot be sent, so it cannot be right.
        async_imap::error::Error::Validate(_) => BackendError::Unauthorised,
        other => classify(other),
    }
}

/// The class of a protocol failure after login.
pub(crate) fn classify(error: &async_imap::error::Error) -> BackendError {
    use async_imap::error::Error;
    match error {
        Error::Io(e) if e.kind() == std::io::ErrorKind::TimedOut => BackendError::Timeout,
        Error::Io(_) | Error::ConnectionLost => BackendError::Unavailable,
        // A tagged NO: the server refused this command (a missing mailbox, a bad UID set).
        Error::No(_) => BackendError::NotFound,
        Error::Bad(_) | Error::Parse(_) | Error::Append => BackendError::Malformed,
        Error::Validate(_) => BackendError::BadId,
        _ => BackendError::Malformed,
    }
}

/// Whether an error means the connection itself is gone (so it must not go back to the pool).
pub(crate) fn is_broken(error: &async_imap::error::Error) -> bool {
    use async_imap::error::Error;
    matches!(
        error,
        Error::Io(_) | Error::ConnectionLost | Error::Parse(_)
    )
}

/// The roots a client TLS connection trusts: the web PKI, plus the operator's CA (`ca_pem`, a
/// PEM file's contents) when one is named. `Err` when that file holds no usable certificate.
pub(crate) fn tls_roots(ca_pem: Option<&[u8]>) -> Result<rustls::RootCertStore, ()> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(pem) = ca_pem {
        let mut added = 0;
        for certificate in CertificateDer::pem_slice_iter(pem) {
            roots.add(certificate.map_err(|_| ())?).map_err(|_| ())?;
            added += 1;
        }
        if added == 0 {
            return Err(());
        }
    }
    Ok(roots)
}

/// A client TLS configuration on aws-lc-rs with rustls's safe protocol versions, trusting
/// `roots`: the one every outbound TLS connection of mailgate's own (IMAP, the index database)
/// uses.
pub(crate) fn tls_client_config(
    roots: impl Into<Arc<rustls::RootCertStore>>,
) -> Result<rustls::ClientConfig, ()> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|_| ())?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

pub(crate) fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_imap::Authenticator as _;

    fn secret(value: &str) -> Secret {
        crate::config::env::Env::from_pairs([("V", value)])
            .secret("V")
            .expect("set")
    }

    #[test]
    fn xoauth2_sends_the_user_and_bearer_token_once() {
        let token = secret("ya29.example-token");
        let mut auth = XOauth2 {
            user: "ops@example.org",
            token: &token,
        };
        assert_eq!(
            auth.process(b""),
            "user=ops@example.org\x01auth=Bearer ya29.example-token\x01\x01"
        );
        // The server's error challenge gets the empty answer that ends the exchange.
        assert_eq!(auth.process(br#"{"status":"401"}"#), "");
    }

    #[test]
    fn settings_are_checked_before_any_connection() {
        let login = || ImapLogin::Password(secret("pw"));
        let user = || "ops@example.org".to_owned();
        assert!(matches!(
            Endpoint::new(
                "imap.example.org",
                143,
                Security::Plain,
                user(),
                login(),
                None
            ),
            Err(ImapSetupError::PlainNotLoopback)
        ));
        for host in ["127.0.0.1", "localhost", "::1", "127.0.0.9"] {
            assert!(
                Endpoint::new(host, 143, Security::Plain, user(), login(), None).is_ok(),
                "{host}"
            );
        }
        assert!(matches!(
            Endpoint::new(
                "imap.example.org",
                993,
                Security::Tls,
                user(),
                login(),
                Some(b"not pem")
            ),
            Err(ImapSetupError::CaFile)
        ));
        let endpoint = Endpoint::new(
            "imap.example.org",
            993,
            Security::Tls,
            user(),
            login(),
            None,
        )
        .expect("ok");
        let shown = format!("{endpoint:?}");
        assert!(!shown.contains("ops@") && !shown.contains("pw"), "{shown}");
    }
}
