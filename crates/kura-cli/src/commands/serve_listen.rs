//! How `kura serve` is reached: TLS on its TCP port (`-Z`, certificates from files as
//! memcached's `-o ssl_*` options name them, read by the one `-o` parser in
//! `serve_options.rs`) or a unix socket instead of TCP (`-s`, `-a`). Kept apart from
//! `serve.rs` so that the listening options read as one group.

use std::path::PathBuf;

use clap::Args;
use kura_server::tls::VerifyMode;
use kura_server::{Config, TlsConfig, UnixSocket};

#[derive(Args, Debug, Default)]
pub struct ListenArgs {
    /// Listen on this unix socket instead of TCP (memcached's -s; a stale socket file there
    /// is replaced, any other file is left alone and refused).
    #[arg(short = 's', long, value_name = "PATH")]
    unix_socket: Option<PathBuf>,
    /// Mode of the unix socket file, octal (memcached's -a).
    #[arg(short = 'a', long, value_name = "MODE", default_value = "700")]
    unix_mask: String,
    /// TLS on the TCP port (memcached's -Z); needs --tls-cert or -o ssl_chain_cert.
    #[arg(short = 'Z', long)]
    tls: bool,
    /// The server's certificate chain, PEM (memcached's ssl_chain_cert).
    #[arg(long, value_name = "PATH")]
    tls_cert: Option<PathBuf>,
    /// The server's private key, PEM (memcached's ssl_key; default: in the chain's file).
    #[arg(long, value_name = "PATH")]
    tls_key: Option<PathBuf>,
    /// CA certificates that client certificates are verified against (memcached's ssl_ca_cert).
    #[arg(long, value_name = "PATH")]
    tls_ca: Option<PathBuf>,
    /// Client certificates: 0 not asked, 1 asked, 2 required, 3 asked once (memcached's
    /// ssl_verify_mode; 1 to 3 need --tls-ca).
    #[arg(long, value_name = "N")]
    tls_verify_mode: Option<String>,
}

impl ListenArgs {
    /// Sets `config.unix_socket` and `config.tls` from the flags; `tls` holds what memcached's
    /// `-o ssl_*` options said (`serve_options::apply_extended` reads every `-o`).
    pub fn apply(&self, config: &mut Config, mut tls: TlsConfig) -> kura::Result<()> {
        // The long options win over -o, whichever comes first on the line.
        tls.cert = self.tls_cert.clone().or(tls.cert);
        tls.key = self.tls_key.clone().or(tls.key);
        tls.ca = self.tls_ca.clone().or(tls.ca);
        if let Some(mode) = &self.tls_verify_mode {
            tls.verify_mode = VerifyMode::parse(mode)?;
        }
        if self.tls {
            config.tls = Some(tls);
        } else if tls != TlsConfig::default() {
            // memcached ignores ssl_* options without -Z and serves plaintext: a forgotten
            // -Z would go unnoticed. Refuse instead.
            return Err(kura::Error::invalid("TLS options were given without -Z/--tls, which turns TLS on"));
        }
        if let Some(path) = &self.unix_socket {
            let mode = kura_server::unix_socket::parse_mode(&self.unix_mask)?;
            config.unix_socket = Some(UnixSocket { path: path.clone(), mode });
            if self.tls {
                // As in memcached, -Z applies to TCP, which -s turns off.
                eprintln!("kura serve: -Z has no effect with -s: the unix socket is not encrypted (as in memcached)");
                config.tls = None;
            }
        }
        Ok(())
    }
}
