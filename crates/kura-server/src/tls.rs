//! TLS on the TCP port (`-Z`), with rustls: the certificates come from PEM files named as
//! memcached names them (`-o ssl_chain_cert=...,ssl_key=...,ssl_ca_cert=...,ssl_verify_mode=N`,
//! or the long options `--tls-cert --tls-key --tls-ca --tls-verify-mode`), and are read and
//! checked once, when the server binds, so a bad file stops the start with an error naming
//! the file and the option.
//!
//! The handshake runs inside the connection's task, counted against the connection limit,
//! and is bounded in time (`handshake_timeout`): a client that opens connections and never
//! finishes a handshake holds at most `max_connections` slots, each for a few seconds.
//!
//! memcached's `ssl_verify_mode` in rustls terms: 0 no client certificate is asked for;
//! 1 one is asked for and verified against `ssl_ca_cert` if the client sends one; 2 one is
//! required; 3 (OpenSSL's "verify the client once", which matters on renegotiation) is the
//! same as 1, since rustls never renegotiates.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use kura::{Error, Result};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_rustls::rustls::crypto::{ring, CryptoProvider};
use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{self, RootCertStore, ServerConfig};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// The longest a handshake may take: the idle timeout if shorter. A client on a fast or slow
/// network finishes a TLS handshake well within it.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// memcached's `ssl_verify_mode`: what is asked of a client's certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum VerifyMode {
    /// 0: no client certificate is asked for.
    #[default]
    None,
    /// 1: asked for, verified if sent.
    Request,
    /// 2: required and verified.
    Require,
    /// 3: verified once (OpenSSL's SSL_VERIFY_CLIENT_ONCE): as `Request` here.
    Once,
}

impl VerifyMode {
    /// memcached's number for the mode, `0` to `3`.
    pub fn parse(text: &str) -> Result<VerifyMode> {
        match text {
            "0" => Ok(VerifyMode::None),
            "1" => Ok(VerifyMode::Request),
            "2" => Ok(VerifyMode::Require),
            "3" => Ok(VerifyMode::Once),
            _ => Err(Error::invalid(format!(
                "--tls-verify-mode (ssl_verify_mode) {text:?}: 0 (none), 1 (request), 2 (require) or 3 (once) is expected"
            ))),
        }
    }

    fn number(self) -> u8 {
        match self {
            VerifyMode::None => 0,
            VerifyMode::Request => 1,
            VerifyMode::Require => 2,
            VerifyMode::Once => 3,
        }
    }
}

/// The TLS settings (`-Z` turns them on; the files come from the options).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsConfig {
    /// `ssl_chain_cert`: the server's certificate chain, PEM, leaf first.
    pub cert: Option<PathBuf>,
    /// `ssl_key`: the private key, PEM; if absent, it is looked for in the chain's file (as
    /// memcached, which loads the key from the chain file then).
    pub key: Option<PathBuf>,
    /// `ssl_ca_cert`: CA certificates client certificates are verified against, PEM.
    pub ca: Option<PathBuf>,
    pub verify_mode: VerifyMode,
    /// `ssl_min_version=3`: TLS 1.3 only (the default, memcached's too, is 1.2 and up).
    pub tls13_only: bool,
}

/// Applies one `-o` option to `tls` if it is one of memcached's `ssl_*` options: true if it
/// was, false if the key is not TLS's (for the caller's other `-o` options). An `ssl_*`
/// option memcached has but rustls cannot honour is an error that says so.
pub fn apply_ssl_option(key: &str, value: &str, tls: &mut TlsConfig) -> Result<bool> {
    match key {
        "ssl_chain_cert" => tls.cert = Some(PathBuf::from(value)),
        "ssl_key" => tls.key = Some(PathBuf::from(value)),
        "ssl_ca_cert" => tls.ca = Some(PathBuf::from(value)),
        "ssl_verify_mode" => tls.verify_mode = VerifyMode::parse(value)?,
        "ssl_min_version" => tls.tls13_only = min_version_is_13(value)?,
        // PEM (memcached's 1) is the only key format read.
        "ssl_keyformat" if value == "1" => {}
        // Session resumption is rustls's default; memcached's buffer size has no counterpart.
        "ssl_session_cache" | "ssl_wbuf_size" => {}
        _ if key.starts_with("ssl_") => return Err(Error::invalid(format!("-o {key}: {UNSUPPORTED}"))),
        _ => return Ok(false),
    }
    Ok(true)
}

const UNSUPPORTED: &str =
    "not supported (ssl_chain_cert, ssl_key, ssl_ca_cert, ssl_verify_mode and ssl_min_version are)";

/// `ssl_min_version`: whether TLS 1.3 alone is asked (3) rather than 1.2 and up (2).
fn min_version_is_13(value: &str) -> Result<bool> {
    match value {
        "2" => Ok(false),
        "3" => Ok(true),
        "0" | "1" => Err(Error::invalid(format!(
            "-o ssl_min_version={value}: TLS 1.0 and 1.1 are not offered (rustls speaks TLS 1.2 and 1.3)"
        ))),
        _ => Err(Error::invalid(format!("-o ssl_min_version={value}: 2 (TLS 1.2) or 3 (TLS 1.3) is expected"))),
    }
}

/// How long a TLS handshake may take, for a server with `idle_timeout`.
pub(crate) fn handshake_timeout(idle_timeout: Option<Duration>) -> Duration {
    idle_timeout.map_or(HANDSHAKE_TIMEOUT, |idle| idle.min(HANDSHAKE_TIMEOUT))
}

/// Completes the server side of a handshake within `limit`; None if it fails (a plaintext
/// client, a refused certificate, a cut connection), times out or the server stops.
pub(crate) async fn handshake(
    acceptor: &TlsAcceptor,
    stream: TcpStream,
    limit: Duration,
    stopping: &mut watch::Receiver<bool>,
) -> Option<TlsStream<TcpStream>> {
    tokio::select! {
        done = tokio::time::timeout(limit, acceptor.accept(stream)) => done.ok()?.ok(),
        _ = stopping.changed() => None,
    }
}

/// An acceptor over the certificates `config` names, read now.
pub(crate) fn acceptor(config: &TlsConfig) -> Result<TlsAcceptor> {
    let cert_path = config.cert.as_ref().ok_or_else(|| {
        Error::invalid("-Z/--tls needs a certificate chain: --tls-cert PATH or -o ssl_chain_cert=PATH")
    })?;
    let chain = read(cert_path, CERT)?;
    let certs = CertificateDer::pem_slice_iter(&chain)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| bad_pem(cert_path, CERT, &e))?;
    if certs.is_empty() {
        return Err(Error::invalid(format!("{CERT} {}: no CERTIFICATE in the file", cert_path.display())));
    }
    let (key_path, key_option) = match &config.key {
        Some(path) => (path, KEY),
        None => (cert_path, CERT),
    };
    let key = PrivateKeyDer::from_pem_slice(&read(key_path, key_option)?).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => Error::invalid(format!(
            "{key_option} {}: no PRIVATE KEY in the file{}",
            key_path.display(),
            if config.key.is_none() { " (give the key with --tls-key or -o ssl_key)" } else { "" }
        )),
        other => bad_pem(key_path, key_option, &other),
    })?;
    let provider = Arc::new(ring::default_provider());
    let versions: &[&rustls::SupportedProtocolVersion] =
        if config.tls13_only { &[&rustls::version::TLS13] } else { rustls::DEFAULT_VERSIONS };
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(versions)
        .map_err(|e| Error::invalid(format!("TLS protocol versions: {e}")))?;
    let builder = match config.verify_mode {
        VerifyMode::None => builder.with_no_client_auth(),
        mode => builder.with_client_cert_verifier(client_verifier(config, mode, provider)?),
    };
    let server = builder
        .with_single_cert(certs, key)
        .map_err(|e| Error::invalid(format!("{CERT} {} with its key: {e}", cert_path.display())))?;
    Ok(TlsAcceptor::from(Arc::new(server)))
}

const CERT: &str = "--tls-cert (ssl_chain_cert)";
const KEY: &str = "--tls-key (ssl_key)";
const CA: &str = "--tls-ca (ssl_ca_cert)";

/// Verifies client certificates against the CA file, requiring one or not.
fn client_verifier(
    config: &TlsConfig,
    mode: VerifyMode,
    provider: Arc<CryptoProvider>,
) -> Result<Arc<dyn rustls::server::danger::ClientCertVerifier>> {
    let ca_path = config.ca.as_ref().ok_or_else(|| {
        Error::invalid(format!(
            "--tls-verify-mode (ssl_verify_mode) {} verifies client certificates: it needs {CA}",
            mode.number()
        ))
    })?;
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&read(ca_path, CA)?) {
        let cert = cert.map_err(|e| bad_pem(ca_path, CA, &e))?;
        roots.add(cert).map_err(|e| Error::invalid(format!("{CA} {}: {e}", ca_path.display())))?;
    }
    if roots.is_empty() {
        return Err(Error::invalid(format!("{CA} {}: no CERTIFICATE in the file", ca_path.display())));
    }
    let builder = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
    let builder = if mode == VerifyMode::Require { builder } else { builder.allow_unauthenticated() };
    builder.build().map_err(|e| Error::invalid(format!("{CA} {}: {e}", ca_path.display())))
}

fn read(path: &Path, option: &str) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::io(format!("{option} {}", path.display()), e))
}

fn bad_pem(path: &Path, option: &str, error: &dyn fmt::Display) -> Error {
    Error::invalid(format!("{option} {}: not PEM as expected: {error}", path.display()))
}

/// The lines of `stats settings` about TLS, as memcached names them.
pub(crate) fn settings(tls: Option<&TlsConfig>, line: &mut dyn FnMut(&str, &dyn fmt::Display)) {
    let path =
        |path: Option<&PathBuf>, none: &'static str| path.map_or_else(|| none.to_string(), |p| p.display().to_string());
    line("ssl_enabled", &if tls.is_some() { "yes" } else { "no" });
    line("ssl_chain_cert", &path(tls.and_then(|t| t.cert.as_ref()), "(null)"));
    line("ssl_key", &path(tls.and_then(|t| t.key.as_ref()), "(null)"));
    line("ssl_verify_mode", &tls.map_or(0, |t| t.verify_mode.number()));
    line("ssl_ca_cert", &path(tls.and_then(|t| t.ca.as_ref()), "NULL"));
    line("ssl_min_version", &if tls.is_some_and(|t| t.tls13_only) { "tlsv1.3" } else { "tlsv1.2" });
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]

    use super::*;

    #[test]
    fn memcached_s_ssl_options_fill_the_config_and_others_are_left_to_the_caller() {
        let mut tls = TlsConfig::default();
        for (key, value) in
            [("ssl_chain_cert", "c.pem"), ("ssl_key", "k.pem"), ("ssl_ca_cert", "ca.pem"), ("ssl_verify_mode", "2")]
        {
            assert!(apply_ssl_option(key, value, &mut tls).unwrap());
        }
        assert_eq!(tls.cert.as_deref(), Some(Path::new("c.pem")));
        assert_eq!(tls.key.as_deref(), Some(Path::new("k.pem")));
        assert_eq!(tls.ca.as_deref(), Some(Path::new("ca.pem")));
        assert_eq!(tls.verify_mode, VerifyMode::Require);
        assert!(!apply_ssl_option("modern", "", &mut tls).unwrap());
        assert!(apply_ssl_option("ssl_verify_mode", "4", &mut tls).is_err());
        assert!(apply_ssl_option("ssl_ciphers", "HIGH", &mut tls).is_err());
        assert!(apply_ssl_option("ssl_min_version", "1", &mut tls).is_err());
        assert!(apply_ssl_option("ssl_min_version", "3", &mut tls).unwrap());
        assert!(tls.tls13_only);
    }

    #[test]
    fn a_missing_file_is_named_with_its_option() {
        let tls = TlsConfig { cert: Some(PathBuf::from("/nonexistent/chain.pem")), ..TlsConfig::default() };
        let error = acceptor(&tls).err().unwrap().to_string();
        assert!(error.contains("--tls-cert (ssl_chain_cert) /nonexistent/chain.pem"), "{error}");
        let error = acceptor(&TlsConfig::default()).err().unwrap().to_string();
        assert!(error.contains("needs a certificate chain"), "{error}");
    }

    #[test]
    fn the_handshake_is_bounded_by_the_idle_timeout_and_a_few_seconds() {
        assert_eq!(handshake_timeout(None), HANDSHAKE_TIMEOUT);
        assert_eq!(handshake_timeout(Some(Duration::from_secs(1))), Duration::from_secs(1));
        assert_eq!(handshake_timeout(Some(Duration::from_secs(600))), HANDSHAKE_TIMEOUT);
    }
}
