//! One authenticated IMAP connection: TCP, then implicit TLS, STARTTLS or (to a loopback host
//! only) nothing, then `LOGIN` or `AUTHENTICATE XOAUTH2` / `OAUTHBEARER`, then the server's
//! capabilities.
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
//! - A delegated login ([`Login::Delegated`], issue 37) takes a token from the alias's source at
//!   every connect. A refused token is invalidated and a fresh one (a refresh) tried once more on
//!   the same connection; a second refusal is `Unauthorised`, and a grant that must be renewed
//!   is `AuthRequired` naming the alias. A session the server ends when its token expires is
//!   a dead connection to the pool, which connects again, with a fresh token.

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
use crate::backends::bearer::{self, DelegatedBearer};
use crate::config::imap::ImapLogin;
use crate::config::{SaslMechanism, Security};

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

/// How a mailbox logs in.
#[derive(Clone, Debug)]
pub(crate) enum Login {
    /// The credential the `imap` block names (`passwordEnv` / `oauth2TokenEnv`).
    Static(ImapLogin),
    /// The alias's delegated sign-in (`backend.auth`): a bearer token from its source, by the
    /// mechanism the block's `auth.mechanism` names.
    Delegated {
        tokens: DelegatedBearer,
        mechanism: SaslMechanism,
    },
}

/// Everything needed to open a connection to one mailbox's IMAP server.
pub(crate) struct Endpoint {
    host: String,
    port: u16,
    security: Security,
    server_name: ServerName<'static>,
    tls: TlsConnector,
    user: String,
    login: Login,
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
        login: Login,
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
        let mut session = match &self.login {
            Login::Static(ImapLogin::Password(password)) => client
                .login(&self.user, password.expose())
                .await
                .map_err(|(e, _)| login_error(&e))?,
            Login::Static(ImapLogin::OAuth2(token)) => client
                .authenticate(
                    "XOAUTH2",
                    Sasl {
                        mechanism: SaslMechanism::XOAuth2,
                        user: &self.user,
                        token: token.expose(),
                    },
                )
                .await
                .map_err(|(e, _)| login_error(&e))?,
            Login::Delegated { tokens, mechanism } => {
                self.authenticate_delegated(client, tokens, *mechanism)
                    .await?
            }
        };
        let capabilities = session.capabilities().await.map_err(|e| classify(&e))?;
        // Gmail's X-GM-EXT-1 (labels, X-GM-RAW search) is deliberately not used: a label could
        // widen what an alias reaches past its folders, and folders stay the only scope.
        let caps = ServerCaps {
            r#move: capabilities.has_str("MOVE"),
            uidplus: capabilities.has_str("UIDPLUS"),
            condstore: capabilities.has_str("CONDSTORE") || capabilities.has_str("QRESYNC"),
        };
        Ok((session, caps))
    }

    /// `AUTHENTICATE` with the alias's token; a refusal (tagged `NO`) invalidates it and tries
    /// a fresh one once more on the same connection (see the module invariants).
    async fn authenticate_delegated(
        &self,
        mut client: Client<Stream>,
        tokens: &DelegatedBearer,
        mechanism: SaslMechanism,
    ) -> Result<ImapSession, BackendError> {
        let mut retried = false;
        loop {
            let token = tokens.get().await?;
            let sasl = Sasl {
                mechanism,
                user: &self.user,
                token: token.expose(),
            };
            let attempt = client.authenticate(mechanism.as_str(), sasl).await;
            match attempt {
                Ok(session) => return Ok(session),
                // The server could not check the token (its provider is down, RFC 5530): no
                // refresh would help, and the token is not to be forgotten.
                Err((async_imap::error::Error::No(text), _)) if temporary(&text) => {
                    tracing::warn!(
                        alias = tokens.alias(),
                        mechanism = mechanism.as_str(),
                        "the IMAP server could not check the delegated token now (UNAVAILABLE)"
                    );
                    return Err(BackendError::Unavailable);
                }
                Err((async_imap::error::Error::No(_), again)) if !retried => {
                    tracing::info!(
                        alias = tokens.alias(),
                        mechanism = mechanism.as_str(),
                        "the IMAP server refused the delegated token; refreshing it once"
                    );
                    tokens.invalidate(&token).await;
                    retried = true;
                    client = again;
                }
                Err((e, _)) => {
                    let class = login_error(&e);
                    if matches!(class, BackendError::Unauthorised) {
                        tracing::warn!(
                            alias = tokens.alias(),
                            mechanism = mechanism.as_str(),
                            "the IMAP server refused the delegated token after a refresh"
                        );
                    }
                    return Err(class);
                }
            }
        }
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

/// A SASL exchange with a bearer token (async-imap base64-encodes each answer): the initial
/// response, then the reply to an error challenge that lets the server's tagged `NO` arrive
/// (XOAUTH2: an empty answer; RFC 7628 OAUTHBEARER: `^A`).
struct Sasl<'a> {
    mechanism: SaslMechanism,
    user: &'a str,
    token: &'a str,
}

impl async_imap::Authenticator for Sasl<'_> {
    type Response = String;

    fn process(&mut self, challenge: &[u8]) -> String {
        match (self.mechanism, challenge.is_empty()) {
            (SaslMechanism::XOAuth2, true) => bearer::xoauth2_response(self.user, self.token),
            (SaslMechanism::XOAuth2, false) => String::new(),
            (SaslMechanism::OAuthBearer, true) => {
                bearer::oauthbearer_response(self.user, self.token)
            }
            (SaslMechanism::OAuthBearer, false) => bearer::OAUTHBEARER_ERROR_REPLY.to_owned(),
        }
    }
}

/// Whether a tagged NO says the failure is temporary (RFC 5530's `[UNAVAILABLE]`: Dovecot's
/// answer when the passdb, such as its OAuth provider, cannot be asked). imap-proto leaves a
/// code it does not know in the text, which async-imap's error quotes.
fn temporary(no: &str) -> bool {
    no.contains("\"[UNAVAILABLE]")
}

/// A failed login: refused credentials, or a connection that failed during it.
fn login_error(error: &async_imap::error::Error) -> BackendError {
    match error {
        async_imap::error::Error::No(text) if temporary(text) => BackendError::Unavailable,
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
    use crate::config::env::Secret;
    use async_imap::Authenticator as _;

    fn secret(value: &str) -> Secret {
        crate::config::env::Env::from_pairs([("V", value)])
            .secret("V")
            .expect("set")
    }

    #[test]
    fn xoauth2_sends_the_user_and_bearer_token_once() {
        let token = secret("ya29.example-token");
        let mut auth = Sasl {
            mechanism: SaslMechanism::XOAuth2,
            user: "ops@example.org",
            token: token.expose(),
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
        let login = || Login::Static(ImapLogin::Password(secret("pw")));
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

    #[test]
    fn oauthbearer_sends_the_rfc_7628_initial_response_and_answers_an_error_with_0x01() {
        let mut auth = Sasl {
            mechanism: SaslMechanism::OAuthBearer,
            user: "robin@example.com",
            token: "del-1",
        };
        assert_eq!(
            auth.process(b"").as_bytes(),
            b"n,a=robin@example.com,\x01auth=Bearer del-1\x01\x01"
        );
        assert_eq!(
            auth.process(br#"{"status":"invalid_token"}"#).as_bytes(),
            [0x01]
        );
    }

    /// What a scripted SASL server saw: each decoded client message, and the connections made.
    #[derive(Default)]
    struct Seen {
        messages: Vec<Vec<u8>>,
        connections: usize,
    }

    /// A scripted IMAP server on loopback that refuses the first `refusals` AUTHENTICATE
    /// exchanges the way Dovecot and Gmail do (an error challenge, then, once the client has
    /// answered it, a tagged NO) and accepts the next.
    async fn sasl_server(refusals: usize) -> (u16, Arc<std::sync::Mutex<Seen>>) {
        sasl_server_refusing(refusals, "[AUTHENTICATIONFAILED] Authentication failed.").await
    }

    /// [`sasl_server`], its tagged NO saying `refusal`.
    async fn sasl_server_refusing(
        refusals: usize,
        refusal: &'static str,
    ) -> (u16, Arc<std::sync::Mutex<Seen>>) {
        use base64::Engine as _;
        use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
        let b64 = base64::engine::general_purpose::STANDARD;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let seen = Arc::new(std::sync::Mutex::new(Seen::default()));
        let record = Arc::clone(&seen);
        tokio::spawn(async move {
            let mut refused = 0;
            while let Ok((socket, _)) = listener.accept().await {
                record.lock().expect("seen").connections += 1;
                let (read, mut write) = socket.into_split();
                let mut lines = BufReader::new(read).lines();
                write.write_all(b"* OK ready\r\n").await.ok();
                while let Ok(Some(line)) = lines.next_line().await {
                    let (tag, command) = line.split_once(' ').unwrap_or((&line, ""));
                    let reply = if command.starts_with("AUTHENTICATE") {
                        write.write_all(b"+ \r\n").await.ok();
                        let Ok(Some(response)) = lines.next_line().await else {
                            break;
                        };
                        let decoded = b64.decode(response.trim()).expect("base64");
                        record.lock().expect("seen").messages.push(decoded);
                        if refused < refusals {
                            refused += 1;
                            let error = b64.encode(br#"{"status":"invalid_token"}"#);
                            write
                                .write_all(format!("+ {error}\r\n").as_bytes())
                                .await
                                .ok();
                            let Ok(Some(answer)) = lines.next_line().await else {
                                break;
                            };
                            let decoded = b64.decode(answer.trim()).expect("base64");
                            record.lock().expect("seen").messages.push(decoded);
                            format!("{tag} NO {refusal}\r\n")
                        } else {
                            format!("{tag} OK authenticated\r\n")
                        }
                    } else if command.starts_with("CAPABILITY") {
                        format!("* CAPABILITY IMAP4rev1 MOVE X-GM-EXT-1\r\n{tag} OK done\r\n")
                    } else {
                        format!("{tag} BAD unexpected\r\n")
                    };
                    write.write_all(reply.as_bytes()).await.ok();
                }
            }
        });
        (port, seen)
    }

    fn delegated_endpoint(
        port: u16,
        sign_in: &bearer::testing::FakeSignIn,
        mechanism: SaslMechanism,
    ) -> Endpoint {
        let login = Login::Delegated {
            tokens: sign_in.bearer.clone(),
            mechanism,
        };
        Endpoint::new(
            "127.0.0.1",
            port,
            Security::Plain,
            "robin@example.com".to_owned(),
            login,
            None,
        )
        .expect("endpoint")
    }

    #[tokio::test]
    async fn a_refused_delegated_token_is_refreshed_and_retried_once_on_the_same_connection() {
        use bearer::testing::FakeSignIn;
        let (port, seen) = sasl_server(1).await;
        let sign_in = FakeSignIn::signed_in("personal");
        let endpoint = delegated_endpoint(port, &sign_in, SaslMechanism::OAuthBearer);
        let (_session, caps) = endpoint.connect().await.expect("logged in after a refresh");
        assert!(caps.r#move);
        assert_eq!(sign_in.refreshes(), 2);
        let seen = seen.lock().expect("seen");
        assert_eq!(seen.connections, 1, "the retry used the same connection");
        assert_eq!(
            seen.messages,
            [
                b"n,a=robin@example.com,\x01auth=Bearer del-1\x01\x01".to_vec(),
                b"\x01".to_vec(),
                b"n,a=robin@example.com,\x01auth=Bearer del-2\x01\x01".to_vec(),
            ]
        );
    }

    /// Dovecot's answer when its OAuth provider cannot be reached: the mailbox is unavailable
    /// (retry later), not the credentials refused, and the token is kept (no refresh).
    #[tokio::test]
    async fn a_temporary_refusal_is_unavailable_and_keeps_the_token() {
        use bearer::testing::FakeSignIn;
        let (port, seen) = sasl_server_refusing(
            usize::MAX,
            "[UNAVAILABLE] Temporary authentication failure.",
        )
        .await;
        let sign_in = FakeSignIn::signed_in("personal");
        let endpoint = delegated_endpoint(port, &sign_in, SaslMechanism::XOAuth2);
        let err = endpoint
            .connect()
            .await
            .map(|_| ())
            .expect_err("unavailable");
        assert!(matches!(err, BackendError::Unavailable), "{err:?}");
        assert_eq!(
            sign_in.refreshes(),
            1,
            "no refresh for a server that could not check"
        );
        assert_eq!(seen.lock().expect("seen").messages.len(), 2);
    }

    #[tokio::test]
    async fn a_second_refusal_is_unauthorised_and_no_grant_sends_nothing() {
        use bearer::testing::FakeSignIn;
        let (port, seen) = sasl_server(usize::MAX).await;
        let sign_in = FakeSignIn::signed_in("personal");
        let endpoint = delegated_endpoint(port, &sign_in, SaslMechanism::XOAuth2);
        let err = endpoint
            .connect()
            .await
            .map(|_| ())
            .expect_err("refused twice");
        assert!(matches!(err, BackendError::Unauthorised), "{err:?}");
        assert_eq!(sign_in.refreshes(), 2, "one refresh, not a loop");
        {
            let seen = seen.lock().expect("seen");
            assert_eq!(
                seen.messages,
                [
                    b"user=robin@example.com\x01auth=Bearer del-1\x01\x01".to_vec(),
                    Vec::new(),
                    b"user=robin@example.com\x01auth=Bearer del-2\x01\x01".to_vec(),
                    Vec::new(),
                ]
            );
        }

        let (port, seen) = sasl_server(0).await;
        let sign_in = FakeSignIn::not_signed_in("personal");
        let endpoint = delegated_endpoint(port, &sign_in, SaslMechanism::XOAuth2);
        let err = endpoint.connect().await.map(|_| ()).expect_err("no grant");
        assert!(
            matches!(&err, BackendError::AuthRequired(alias) if alias == "personal"),
            "{err:?}"
        );
        assert!(
            seen.lock().expect("seen").messages.is_empty(),
            "no AUTHENTICATE"
        );
    }
}
