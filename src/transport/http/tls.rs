//! The HTTP transport's TLS (issue 29, item 3): rustls on aws-lc-rs (the TLS stack the clients
//! already use), the certificate chain and key read from the operator's PEM files
//! (`MAILGATE_HTTP_TLS_CERT`, `MAILGATE_HTTP_TLS_KEY`), and read again on SIGHUP so a renewed
//! certificate needs no restart.
//!
//! Invariants: the key file is read through `path_guard` as a private file (owned by the user
//! running mailgate, mode 0600, not a symlink), the certificate as a trusted one (not writable by
//! others); TLS 1.2 and 1.3 only, HTTP/1.1 by ALPN. A reload that fails (a file half-written, a
//! key that does not match) keeps the acceptor that works and says so in the log; new
//! connections use the new one, connections in progress keep theirs. Error messages name the
//! variable and the rule, never a path's contents.
//!
//! Who may call it: `transport::http` at startup ([`Tls::load`]) and its accept loop
//! ([`Tls::acceptor`], [`Tls::reload_on_sighup`]).

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;

use crate::config::{HTTP_TLS_CERT_VAR, HTTP_TLS_KEY_VAR};
use crate::path_guard;

/// The largest certificate chain or key file read.
const MAX_PEM_BYTES: u64 = 256 * 1024;

/// Where the certificate chain and key are (absolute paths, checked in `settings`).
#[derive(Clone, Debug)]
pub(crate) struct TlsFiles {
    pub(crate) cert: PathBuf,
    pub(crate) key: PathBuf,
}

/// Why the TLS files could not be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TlsError {
    #[error("{var} cannot be read ({why})")]
    Read {
        var: &'static str,
        why: path_guard::PrivateFileError,
    },
    #[error("{var} holds no PEM {what}")]
    Pem {
        var: &'static str,
        what: &'static str,
    },
    #[error("the TLS certificate and key do not make a server identity ({0})")]
    Identity(String),
}

/// The current acceptor, replaced on reload.
pub(crate) struct Tls {
    files: TlsFiles,
    current: RwLock<TlsAcceptor>,
}

impl Tls {
    /// Reads the files and builds the first acceptor; any fault refuses startup.
    pub(crate) fn load(files: TlsFiles) -> Result<Self, TlsError> {
        let acceptor = acceptor(&files)?;
        Ok(Self {
            files,
            current: RwLock::new(acceptor),
        })
    }

    /// The acceptor new connections use.
    pub(crate) fn acceptor(&self) -> TlsAcceptor {
        // A poisoned lock means a reload panicked mid-write, which `reload` cannot do (it builds
        // first, then swaps one value); the last value is still whole.
        match self.current.read() {
            Ok(guard) => guard.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Reads the files again; on success new connections use them.
    pub(crate) fn reload(&self) -> Result<(), TlsError> {
        let fresh = acceptor(&self.files)?;
        match self.current.write() {
            Ok(mut guard) => *guard = fresh,
            Err(poisoned) => *poisoned.into_inner() = fresh,
        }
        Ok(())
    }

    /// Reloads on every SIGHUP for as long as the process runs.
    pub(crate) fn reload_on_sighup(self: &Arc<Self>) -> std::io::Result<()> {
        use tokio::signal::unix::{SignalKind, signal};
        let mut hangups = signal(SignalKind::hangup())?;
        let tls = Arc::clone(self);
        tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                match tls.reload() {
                    Ok(()) => tracing::info!("TLS certificate and key reloaded"),
                    Err(e) => tracing::warn!(
                        error = %e,
                        "TLS reload failed; the previous certificate stays in use"
                    ),
                }
            }
        });
        Ok(())
    }
}

fn acceptor(files: &TlsFiles) -> Result<TlsAcceptor, TlsError> {
    let cert_pem = path_guard::read_optional_trusted_file(&files.cert, MAX_PEM_BYTES)
        .map_err(|why| TlsError::Read {
            var: HTTP_TLS_CERT_VAR,
            why,
        })?
        .ok_or(TlsError::Read {
            var: HTTP_TLS_CERT_VAR,
            why: path_guard::PrivateFileError::NotAvailable,
        })?;
    let key_pem =
        path_guard::read_private_file(&files.key, MAX_PEM_BYTES).map_err(|why| TlsError::Read {
            var: HTTP_TLS_KEY_VAR,
            why,
        })?;
    server_config(&cert_pem, &key_pem).map(|config| TlsAcceptor::from(Arc::new(config)))
}

/// A server configuration from PEM bytes: the chain in file order, the one key.
fn server_config(cert_pem: &[u8], key_pem: &[u8]) -> Result<rustls::ServerConfig, TlsError> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|_| TlsError::Pem {
            var: HTTP_TLS_CERT_VAR,
            what: "certificate",
        })?;
    if chain.is_empty() {
        return Err(TlsError::Pem {
            var: HTTP_TLS_CERT_VAR,
            what: "certificate",
        });
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|_| TlsError::Pem {
        var: HTTP_TLS_KEY_VAR,
        what: "private key",
    })?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Identity(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| TlsError::Identity(e.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    const CERT_1: &[u8] = include_bytes!("../../../tests/fixtures/tls/test-only-leaf-1.pem");
    const KEY_1: &[u8] = include_bytes!("../../../tests/fixtures/tls/test-only-leaf-1.key");
    const KEY_2: &[u8] = include_bytes!("../../../tests/fixtures/tls/test-only-leaf-2.key");

    #[test]
    fn a_matching_chain_and_key_make_a_server_and_anything_else_is_refused() {
        let config = server_config(CERT_1, KEY_1).expect("identity");
        assert_eq!(config.alpn_protocols, [b"http/1.1".to_vec()]);
        assert!(matches!(
            server_config(CERT_1, KEY_2),
            Err(TlsError::Identity(_))
        ));
        assert!(matches!(
            server_config(b"", KEY_1),
            Err(TlsError::Pem {
                var: HTTP_TLS_CERT_VAR,
                ..
            })
        ));
        assert!(matches!(
            server_config(
                CERT_1,
                b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"
            ),
            Err(TlsError::Pem {
                var: HTTP_TLS_KEY_VAR,
                ..
            } | TlsError::Identity(_))
        ));
        let message = server_config(CERT_1, KEY_2)
            .expect_err("refused")
            .to_string();
        assert!(!message.contains("BEGIN"), "{message}");
    }
}
