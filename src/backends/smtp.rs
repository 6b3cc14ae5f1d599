//! SMTP submission for a sending mailbox with an `smtp` block: the only module that talks to an
//! SMTP server (lettre's `AsyncSmtpTransport` over tokio and rustls).
//!
//! Invariants:
//! - [`SmtpSender::send`] takes a [`SendPermit`] by value and transmits exactly what it holds:
//!   the permit's envelope (`MAIL FROM` = the pinned sender, `RCPT TO` = every approved
//!   recipient, bcc included) and its rendered bytes. There is no other send method.
//! - One attempt per permit: no connection pool, no retry on a transient or permanent failure
//!   (a replay could duplicate mail); the caller is told the attempt failed. The one exception
//!   is a delegated sender's refused token: `AUTH` comes before `MAIL FROM`, so after a
//!   refused `AUTH` nothing of the message has been sent, and one more connection with a
//!   refreshed token may try; the transaction (`MAIL FROM` .. `DATA`) still runs at most once.
//! - `security`: `tls` is implicit TLS (port usually 465), `starttls` requires the upgrade before
//!   anything is sent (a server that does not offer it fails the send), `plain` only to a
//!   loopback host (the config refuses it elsewhere; checked again here). Certificates are
//!   verified against the bundled web PKI roots plus the optional `caFile`.
//! - The credential arrives as a [`Secret`] resolved at startup from the variable the config
//!   names, or, for a mailbox with `backend.auth` (issue 37), as the alias's delegated token
//!   taken fresh at each send; it is handed to lettre and never formatted. Errors carry
//!   classes, never the server's text (which may echo addresses) or the credential.
//!
//! Who may call it: startup builds the sender; the send tool hands it permits.

use std::time::Duration;

use lettre::address::Envelope;
use lettre::transport::smtp::authentication::{Credentials, Mechanism};
use lettre::transport::smtp::client::{AsyncSmtpConnection, Certificate, Tls, TlsParameters};
use lettre::transport::smtp::extension::ClientId;
use lettre::{Address, AsyncSmtpTransport, AsyncTransport, Tokio1Executor};

use super::BackendError;
use super::bearer::DelegatedBearer;
use crate::address::EmailAddress;
use crate::config::env::Secret;
use crate::config::{Security, ServerSpec};
use crate::outbound::{SendPermit, SentMessage};

/// Per-command timeout: long enough for a slow submission server, short enough that a stuck one
/// does not hold the tool call for minutes.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);

/// Why the SMTP transport could not be prepared at startup.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum SmtpSetupError {
    #[error("the smtp caFile holds no usable PEM certificate")]
    CaFile,
    #[error("the TLS settings for the smtp host could not be built")]
    Tls,
    #[error("plain SMTP is only allowed to a loopback host")]
    PlainNotLoopback,
}

/// Why one send attempt failed. Classes only: the server's reply text is never passed on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum SmtpError {
    #[error("the mail server refused the message")]
    Rejected,
    #[error("the mail server answered with a temporary failure")]
    Transient,
    #[error("the mail server could not be reached or the connection failed")]
    Connection,
    #[error("the TLS connection to the mail server failed")]
    Tls,
    #[error("an approved address could not be used in the SMTP envelope")]
    Envelope,
    /// The server refused the delegated token, and the refreshed one too.
    #[error("the mail server refused the delegated sign-in's token")]
    Unauthorised,
    /// The server does not offer `AUTH XOAUTH2`, which a delegated sender needs.
    #[error("the mail server does not offer AUTH XOAUTH2")]
    NoXoauth2,
    /// No token: the alias's sign-in must be renewed (`mailgate auth login ALIAS`), or the token
    /// source failed (its class).
    #[error("no delegated token: {0}")]
    Token(TokenClass),
}

/// Why a delegated sender had no token, as the class a tool error needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TokenClass {
    /// The alias must be signed in again (holds the alias).
    AuthRequired(String),
    Unauthorised,
    Unavailable,
    Timeout,
    Malformed,
}

impl std::fmt::Display for TokenClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenClass::AuthRequired(alias) => {
                write!(
                    f,
                    "run `mailgate auth login {alias}` to sign alias {alias} in again"
                )
            }
            TokenClass::Unauthorised => {
                f.write_str("the grant or the app registration was refused")
            }
            TokenClass::Unavailable => f.write_str("the token endpoint could not be reached"),
            TokenClass::Timeout => f.write_str("the token endpoint did not answer in time"),
            TokenClass::Malformed => f.write_str("the token endpoint's answer could not be read"),
        }
    }
}

impl SmtpError {
    /// The backend class of a failure the tool reports as such (a sign-in to renew); `None`
    /// for a send failure of its own kind.
    pub(crate) fn backend_class(&self) -> Option<BackendError> {
        match self {
            SmtpError::Token(TokenClass::AuthRequired(alias)) => {
                Some(BackendError::AuthRequired(alias.clone()))
            }
            SmtpError::Token(TokenClass::Unauthorised) | SmtpError::Unauthorised => {
                Some(BackendError::Unauthorised)
            }
            _ => None,
        }
    }
}

fn token_class(error: BackendError) -> SmtpError {
    SmtpError::Token(match error {
        BackendError::AuthRequired(alias) => TokenClass::AuthRequired(alias),
        BackendError::Unauthorised => TokenClass::Unauthorised,
        BackendError::Timeout => TokenClass::Timeout,
        BackendError::Malformed => TokenClass::Malformed,
        _ => TokenClass::Unavailable,
    })
}

/// The SMTP transport of the sending mailbox.
pub(crate) struct SmtpSender {
    route: Route,
}

enum Route {
    /// The block's own credential (or none): lettre's transport, its credentials fixed.
    Static(AsyncSmtpTransport<Tokio1Executor>),
    /// The alias's delegated tokens: a connection per send, authenticated with a token fresh at
    /// send time.
    Delegated(Box<DelegatedSmtp>),
}

/// A delegated sender's connection settings.
struct DelegatedSmtp {
    host: String,
    port: u16,
    tls: Tls,
    user: String,
    tokens: DelegatedBearer,
}

/// The connection security `spec` asks for, with the bundled roots plus its `caFile`.
fn tls(spec: &ServerSpec, ca_pem: Option<&[u8]>) -> Result<Tls, SmtpSetupError> {
    let tls_parameters = || -> Result<TlsParameters, SmtpSetupError> {
        let mut builder = TlsParameters::builder(spec.host.clone());
        if let Some(pem) = ca_pem {
            let certificate = Certificate::from_pem(pem).map_err(|_| SmtpSetupError::CaFile)?;
            builder = builder.add_root_certificate(certificate);
        }
        builder.build_rustls().map_err(|_| SmtpSetupError::Tls)
    };
    Ok(match spec.security {
        Security::Tls => Tls::Wrapper(tls_parameters()?),
        Security::Starttls => Tls::Required(tls_parameters()?),
        Security::Plain if crate::config::is_loopback_host(&spec.host) => Tls::None,
        Security::Plain => return Err(SmtpSetupError::PlainNotLoopback),
    })
}

/// The user name an `smtp` block logs in as: its `username`, else the mailbox address.
fn user(spec: &ServerSpec, login: &EmailAddress) -> String {
    spec.username
        .clone()
        .unwrap_or_else(|| login.as_str().to_owned())
}

impl SmtpSender {
    /// Builds the transport for `spec`. `login` is the mailbox address, used as the user name
    /// when the block sets none; `secret` is the value of its `passwordEnv` / `oauth2TokenEnv`;
    /// `ca_pem` the contents of its `caFile`.
    pub(crate) fn new(
        spec: &ServerSpec,
        login: &EmailAddress,
        secret: Option<&Secret>,
        ca_pem: Option<&[u8]>,
    ) -> Result<Self, SmtpSetupError> {
        let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&spec.host)
            .port(spec.port)
            .tls(tls(spec, ca_pem)?)
            .timeout(Some(COMMAND_TIMEOUT));
        if let Some(secret) = secret {
            let mechanisms = if spec.oauth2_token_env.is_some() {
                vec![Mechanism::Xoauth2]
            } else {
                vec![Mechanism::Plain, Mechanism::Login]
            };
            builder = builder
                .credentials(Credentials::new(
                    user(spec, login),
                    secret.expose().to_owned(),
                ))
                .authentication(mechanisms);
        }
        Ok(Self {
            route: Route::Static(builder.build()),
        })
    }

    /// The sender of a mailbox with `backend.auth`: `AUTH XOAUTH2` with the alias's token,
    /// taken at each send. lettre has no OAUTHBEARER, so SMTP uses XOAUTH2 even when the
    /// block's `auth.mechanism` is `oauthbearer` (IMAP honours it); the providers that take
    /// OAUTHBEARER (Gmail, Outlook, Dovecot's `oauth2` passdb) take XOAUTH2 too.
    pub(crate) fn delegated(
        spec: &ServerSpec,
        login: &EmailAddress,
        tokens: DelegatedBearer,
        ca_pem: Option<&[u8]>,
    ) -> Result<Self, SmtpSetupError> {
        Ok(Self {
            route: Route::Delegated(Box::new(DelegatedSmtp {
                host: spec.host.clone(),
                port: spec.port,
                tls: tls(spec, ca_pem)?,
                user: user(spec, login),
                tokens,
            })),
        })
    }

    /// Transmits the permit's message once, to the permit's envelope.
    pub(crate) async fn send(&self, permit: SendPermit) -> Result<SentMessage, SmtpError> {
        let address = |a: &EmailAddress| a.as_str().parse::<Address>();
        let from = address(permit.envelope_from()).map_err(|_| SmtpError::Envelope)?;
        let to = permit
            .envelope_recipients()
            .iter()
            .map(address)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|_| SmtpError::Envelope)?;
        let envelope = Envelope::new(Some(from), to).map_err(|_| SmtpError::Envelope)?;
        match &self.route {
            Route::Static(transport) => match transport.send_raw(&envelope, permit.bytes()).await {
                Ok(_) => Ok(permit.into_sent()),
                Err(error) => Err(classify(&error)),
            },
            Route::Delegated(delegated) => delegated.send(permit, &envelope).await,
        }
    }
}

impl DelegatedSmtp {
    /// Connects (TLS or STARTTLS as configured, then EHLO).
    async fn connect(&self) -> Result<AsyncSmtpConnection, lettre::transport::smtp::Error> {
        let hello = ClientId::default();
        let implicit = match &self.tls {
            Tls::Wrapper(parameters) => Some(parameters.clone()),
            _ => None,
        };
        let mut conn = AsyncSmtpConnection::connect_tokio1(
            (self.host.as_str(), self.port),
            Some(COMMAND_TIMEOUT),
            &hello,
            implicit,
            None,
        )
        .await?;
        if let Tls::Required(parameters) = &self.tls {
            conn.starttls(parameters.clone(), &hello).await?;
        }
        Ok(conn)
    }

    /// Authenticates with a fresh token, then runs the one transaction. A refused `AUTH`
    /// (nothing of the message sent yet) invalidates the token and tries once more, on a new
    /// connection (the refused exchange may have left the old one mid-SASL), with a refreshed
    /// token.
    async fn send(
        &self,
        permit: SendPermit,
        envelope: &Envelope,
    ) -> Result<SentMessage, SmtpError> {
        let mut retried = false;
        loop {
            let token = self.tokens.get().await.map_err(token_class)?;
            let mut conn = self.connect().await.map_err(|e| classify(&e))?;
            if !conn
                .server_info()
                .supports_auth_mechanism(Mechanism::Xoauth2)
            {
                conn.abort().await;
                return Err(SmtpError::NoXoauth2);
            }
            let credentials = Credentials::new(self.user.clone(), token.expose().to_owned());
            let authenticated = conn.auth(&[Mechanism::Xoauth2], &credentials).await;
            drop(credentials);
            match authenticated {
                Ok(_) => {}
                // 5xx (535), or lettre's refusal of the error challenge XOAUTH2 servers send
                // before their 535.
                Err(e) if e.is_permanent() || e.is_client() => {
                    conn.abort().await;
                    if retried {
                        tracing::warn!(
                            alias = self.tokens.alias(),
                            "the SMTP server refused the delegated token after a refresh"
                        );
                        return Err(SmtpError::Unauthorised);
                    }
                    tracing::info!(
                        alias = self.tokens.alias(),
                        "the SMTP server refused the delegated token; refreshing it once"
                    );
                    self.tokens.invalidate(&token).await;
                    retried = true;
                    continue;
                }
                Err(e) => {
                    conn.abort().await;
                    return Err(classify(&e));
                }
            }
            // Authenticated: the transaction runs once, whatever it answers.
            let sent = conn.send(envelope, permit.bytes()).await;
            if sent.is_ok() {
                let _ = conn.quit().await;
            }
            return match sent {
                Ok(_) => Ok(permit.into_sent()),
                Err(e) => Err(classify(&e)),
            };
        }
    }
}

fn classify(error: &lettre::transport::smtp::Error) -> SmtpError {
    if error.is_permanent() {
        SmtpError::Rejected
    } else if error.is_transient() {
        SmtpError::Transient
    } else if error.is_tls() || is_tls_failure(error) {
        SmtpError::Tls
    } else {
        SmtpError::Connection
    }
}

/// lettre reports a failed handshake (an untrusted certificate, a name mismatch) as a connection
/// error wrapping the `InvalidData` I/O error tokio-rustls raises; look for it in the chain.
fn is_tls_failure(error: &lettre::transport::smtp::Error) -> bool {
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        if cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::InvalidData)
        {
            return true;
        }
        source = cause.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::outbound::test_permit;

    fn spec(host: &str, port: u16, security: Security) -> ServerSpec {
        ServerSpec {
            host: host.to_owned(),
            port,
            security,
            username: None,
            password_env: None,
            oauth2_token_env: None,
            ca_file: None,
            rate_limit: None,
        }
    }

    fn login() -> EmailAddress {
        EmailAddress::parse("finance@example.com").unwrap()
    }

    #[test]
    fn every_security_mode_builds_and_plain_needs_loopback() {
        for security in [Security::Tls, Security::Starttls] {
            assert!(
                SmtpSender::new(
                    &spec("smtp.example.com", 465, security),
                    &login(),
                    None,
                    None
                )
                .is_ok()
            );
        }
        for host in ["127.0.0.1", "127.3.4.5", "::1", "localhost"] {
            assert!(
                SmtpSender::new(&spec(host, 2525, Security::Plain), &login(), None, None).is_ok(),
                "{host}"
            );
        }
        for host in ["smtp.example.com", "10.0.0.1", "::ffff:127.0.0.1"] {
            assert_eq!(
                SmtpSender::new(&spec(host, 25, Security::Plain), &login(), None, None).err(),
                Some(SmtpSetupError::PlainNotLoopback),
                "{host}"
            );
        }
    }

    #[test]
    fn a_bad_ca_file_is_refused() {
        let result = SmtpSender::new(
            &spec("smtp.example.com", 465, Security::Tls),
            &login(),
            None,
            Some(b"-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n"),
        );
        assert_eq!(result.err(), Some(SmtpSetupError::CaFile));
    }

    #[tokio::test]
    async fn an_unreachable_server_fails_once_with_a_class() {
        // Bind then drop a listener: the port is closed, so the connection is refused at once.
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let sender = SmtpSender::new(
            &spec("127.0.0.1", port, Security::Plain),
            &login(),
            None,
            None,
        )
        .unwrap();
        let error = sender
            .send(test_permit(&["ana.lima@example.com"]))
            .await
            .err()
            .expect("nothing listens there");
        assert_eq!(error, SmtpError::Connection);
        assert!(!error.to_string().contains("127.0.0.1"));
    }

    /// What a scripted SMTP server saw.
    #[derive(Default)]
    struct Seen {
        /// The decoded XOAUTH2 initial responses, in order.
        auths: Vec<Vec<u8>>,
        connections: usize,
        mail_from: usize,
        messages: usize,
    }

    /// A scripted submission server on loopback offering AUTH XOAUTH2 that refuses the first
    /// `refusals` tokens as Gmail and Dovecot do (an error challenge, then 535) and accepts the
    /// rest.
    async fn smtp_server(refusals: usize) -> (u16, Arc<std::sync::Mutex<Seen>>) {
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
                write.write_all(b"220 fake ESMTP\r\n").await.ok();
                while let Ok(Some(line)) = lines.next_line().await {
                    let reply = if line.starts_with("EHLO") {
                        "250-fake\r\n250-8BITMIME\r\n250 AUTH XOAUTH2\r\n".to_owned()
                    } else if let Some(initial) = line.strip_prefix("AUTH XOAUTH2 ") {
                        let decoded = b64.decode(initial.trim()).expect("base64");
                        record.lock().expect("seen").auths.push(decoded);
                        if refused < refusals {
                            refused += 1;
                            let error = b64.encode(br#"{"status":"401","schemes":"bearer"}"#);
                            write
                                .write_all(format!("334 {error}\r\n").as_bytes())
                                .await
                                .ok();
                            // Whatever the client answers, the exchange fails.
                            let _ = lines.next_line().await;
                            "535 5.7.8 Authentication failed\r\n".to_owned()
                        } else {
                            "235 2.7.0 Accepted\r\n".to_owned()
                        }
                    } else if line.starts_with("MAIL FROM") {
                        record.lock().expect("seen").mail_from += 1;
                        "250 ok\r\n".to_owned()
                    } else if line.starts_with("RCPT TO") {
                        "250 ok\r\n".to_owned()
                    } else if line == "DATA" {
                        write.write_all(b"354 go ahead\r\n").await.ok();
                        while let Ok(Some(body)) = lines.next_line().await {
                            if body == "." {
                                break;
                            }
                        }
                        record.lock().expect("seen").messages += 1;
                        "250 queued\r\n".to_owned()
                    } else if line == "QUIT" {
                        write.write_all(b"221 bye\r\n").await.ok();
                        break;
                    } else {
                        "500 unexpected\r\n".to_owned()
                    };
                    write.write_all(reply.as_bytes()).await.ok();
                }
            }
        });
        (port, seen)
    }

    fn delegated_sender(
        port: u16,
        sign_in: &crate::backends::bearer::testing::FakeSignIn,
    ) -> SmtpSender {
        SmtpSender::delegated(
            &spec("127.0.0.1", port, Security::Plain),
            &login(),
            sign_in.bearer.clone(),
            None,
        )
        .expect("sender")
    }

    fn xoauth2(token: &str) -> Vec<u8> {
        format!("user=finance@example.com\x01auth=Bearer {token}\x01\x01").into_bytes()
    }

    /// A refused token is refreshed and tried once more before anything of the message is
    /// sent; the transaction runs once.
    #[tokio::test]
    async fn a_delegated_sender_retries_a_refused_token_once_before_mail_from() {
        use crate::backends::bearer::testing::FakeSignIn;
        let (port, seen) = smtp_server(1).await;
        let sign_in = FakeSignIn::signed_in("finance");
        let sent = delegated_sender(port, &sign_in)
            .send(test_permit(&["ana.lima@example.com"]))
            .await
            .expect("sent after one refresh");
        assert_eq!(sent.recipients, 1);
        assert_eq!(sign_in.refreshes(), 2);
        let seen = seen.lock().expect("seen");
        assert_eq!(seen.auths, [xoauth2("del-1"), xoauth2("del-2")]);
        assert_eq!(seen.connections, 2, "the retry connects again");
        assert_eq!((seen.mail_from, seen.messages), (1, 1), "one transaction");
    }

    #[tokio::test]
    async fn a_second_refusal_or_no_grant_sends_nothing() {
        use crate::backends::bearer::testing::FakeSignIn;
        let (port, seen) = smtp_server(usize::MAX).await;
        let sign_in = FakeSignIn::signed_in("finance");
        let error = delegated_sender(port, &sign_in)
            .send(test_permit(&["ana.lima@example.com"]))
            .await
            .err()
            .expect("refused twice");
        assert_eq!(error, SmtpError::Unauthorised);
        assert!(matches!(
            error.backend_class(),
            Some(BackendError::Unauthorised)
        ));
        assert_eq!(sign_in.refreshes(), 2, "one refresh, not a loop");
        {
            let seen = seen.lock().expect("seen");
            assert_eq!(seen.auths.len(), 2);
            assert_eq!(seen.mail_from, 0, "nothing of the message was sent");
        }

        let (port, seen) = smtp_server(0).await;
        let sign_in = FakeSignIn::not_signed_in("finance");
        let error = delegated_sender(port, &sign_in)
            .send(test_permit(&["ana.lima@example.com"]))
            .await
            .err()
            .expect("no grant");
        assert_eq!(
            error,
            SmtpError::Token(TokenClass::AuthRequired("finance".to_owned()))
        );
        assert!(
            matches!(error.backend_class(), Some(BackendError::AuthRequired(a)) if a == "finance")
        );
        assert!(
            error.to_string().contains("mailgate auth login finance"),
            "{error}"
        );
        assert_eq!(
            seen.lock().expect("seen").connections,
            0,
            "no connection without a token"
        );
    }
}
