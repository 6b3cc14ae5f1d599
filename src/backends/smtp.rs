//! SMTP submission for a sending mailbox with an `smtp` block: the only module that talks to an
//! SMTP server (lettre's `AsyncSmtpTransport` over tokio and rustls).
//!
//! Invariants:
//! - [`SmtpSender::send`] takes a [`SendPermit`] by value and transmits exactly what it holds:
//!   the permit's envelope (`MAIL FROM` = the pinned sender, `RCPT TO` = every approved
//!   recipient, bcc included) and its rendered bytes. There is no other send method.
//! - One attempt per permit: no connection pool, no retry on a transient or permanent failure
//!   (a replay could duplicate mail); the caller is told the attempt failed.
//! - `security`: `tls` is implicit TLS (port usually 465), `starttls` requires the upgrade before
//!   anything is sent (a server that does not offer it fails the send), `plain` only to a
//!   loopback host (the config refuses it elsewhere; checked again here). Certificates are
//!   verified against the bundled web PKI roots plus the optional `caFile`.
//! - The credential arrives as a [`Secret`] resolved at startup from the variable the config
//!   names; it is handed to lettre and never formatted. Errors carry classes, never the
//!   server's text (which may echo addresses) or the credential.
//!
//! Who may call it: startup builds the sender; the send tool hands it permits.

use std::time::Duration;

use lettre::address::Envelope;
use lettre::transport::smtp::authentication::{Credentials, Mechanism};
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::{Address, AsyncSmtpTransport, AsyncTransport, Tokio1Executor};

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
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
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
}

/// The SMTP transport of the sending mailbox.
pub(crate) struct SmtpSender {
    transport: AsyncSmtpTransport<Tokio1Executor>,
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
        let tls_parameters = || -> Result<TlsParameters, SmtpSetupError> {
            let mut builder = TlsParameters::builder(spec.host.clone());
            if let Some(pem) = ca_pem {
                let certificate = Certificate::from_pem(pem).map_err(|_| SmtpSetupError::CaFile)?;
                builder = builder.add_root_certificate(certificate);
            }
            builder.build_rustls().map_err(|_| SmtpSetupError::Tls)
        };
        let tls = match spec.security {
            Security::Tls => Tls::Wrapper(tls_parameters()?),
            Security::Starttls => Tls::Required(tls_parameters()?),
            Security::Plain if crate::config::is_loopback_host(&spec.host) => Tls::None,
            Security::Plain => return Err(SmtpSetupError::PlainNotLoopback),
        };
        let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&spec.host)
            .port(spec.port)
            .tls(tls)
            .timeout(Some(COMMAND_TIMEOUT));
        if let Some(secret) = secret {
            let user = spec
                .username
                .clone()
                .unwrap_or_else(|| login.as_str().to_owned());
            let mechanisms = if spec.oauth2_token_env.is_some() {
                vec![Mechanism::Xoauth2]
            } else {
                vec![Mechanism::Plain, Mechanism::Login]
            };
            builder = builder
                .credentials(Credentials::new(user, secret.expose().to_owned()))
                .authentication(mechanisms);
        }
        Ok(Self {
            transport: builder.build(),
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
        match self.transport.send_raw(&envelope, permit.bytes()).await {
            Ok(_) => Ok(permit.into_sent()),
            Err(error) => Err(classify(&error)),
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
}
