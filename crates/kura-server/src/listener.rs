//! Where clients connect: a TCP port (plain or TLS) or a unix socket (memcached's `-s`,
//! which disables TCP, as it does in memcached). Every kind of connection ends up in the same
//! protocol loop (`connection::serve`), compiled once per kind of stream.
//!
//! A unix socket's file is ours from bind to stop: a stale one (a socket file left by a
//! server that died) is removed at start, but never a file of any other type; the socket is
//! created with the mode asked (`-a`, memcached's default 0700) and removed at the stop if
//! it is still the one we created.

use std::fmt;
use std::net::SocketAddr;
use std::os::unix::fs::{FileTypeExt as _, MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use kura::{Error, Result};
use tokio::io::AsyncWriteExt as _;
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use crate::config::Config;
use crate::connection;
use crate::protocol::reply;
use crate::shared::Shared;
use crate::tls;
use crate::unix_socket::UnixSocket;

/// Where the server listens, as its start-up line shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Tcp(address) => write!(f, "{address}"),
            Address::Unix(path) => write!(f, "unix:{}", path.display()),
        }
    }
}

/// A bound listener.
pub(crate) enum Listener {
    Tcp { listener: TcpListener, tls: Option<TlsAcceptor> },
    Unix { listener: UnixListener, file: SocketFile },
}

/// A connection just accepted, not yet admitted.
pub(crate) enum Accepted {
    Tcp(TcpStream),
    /// A TCP connection whose TLS handshake is still to come.
    Tls(TcpStream, TlsAcceptor),
    Unix(UnixStream),
}

impl Listener {
    /// Binds what `config` asks: its unix socket if it names one, else `host:port` (with TLS
    /// if configured; the certificates are read and checked here, before anyone connects).
    pub(crate) async fn bind(config: &Config) -> Result<Listener> {
        if let Some(socket) = &config.unix_socket {
            let (listener, file) = bind_unix(socket)?;
            return Ok(Listener::Unix { listener, file });
        }
        let tls = config.tls.as_ref().map(tls::acceptor).transpose()?;
        let address = format!("{}:{}", config.host, config.port);
        let listener = TcpListener::bind(&address).await.map_err(|e| Error::io(format!("binding {address}"), e))?;
        Ok(Listener::Tcp { listener, tls })
    }

    pub(crate) fn address(&self) -> Result<Address> {
        match self {
            Listener::Tcp { listener, .. } => {
                listener.local_addr().map(Address::Tcp).map_err(|e| Error::io("local address", e))
            }
            Listener::Unix { file, .. } => Ok(Address::Unix(file.path.clone())),
        }
    }

    pub(crate) async fn accept(&self) -> std::io::Result<Accepted> {
        match self {
            Listener::Tcp { listener, tls } => {
                let (stream, _) = listener.accept().await?;
                // Replies go out as soon as they are written: no Nagle delay on small ones.
                let _ = stream.set_nodelay(true);
                Ok(match tls {
                    Some(acceptor) => Accepted::Tls(stream, acceptor.clone()),
                    None => Accepted::Tcp(stream),
                })
            }
            Listener::Unix { listener, .. } => Ok(Accepted::Unix(listener.accept().await?.0)),
        }
    }
}

impl Accepted {
    /// Serves the connection until it ends (after its TLS handshake, if any).
    pub(crate) async fn serve(self, shared: Arc<Shared>, mut stopping: watch::Receiver<bool>) {
        match self {
            Accepted::Tcp(stream) => connection::serve(stream, shared, stopping).await,
            Accepted::Unix(stream) => connection::serve(stream, shared, stopping).await,
            Accepted::Tls(stream, acceptor) => {
                let limit = tls::handshake_timeout(shared.config.idle_timeout);
                if let Some(stream) = tls::handshake(&acceptor, stream, limit, &mut stopping).await {
                    connection::serve(stream, shared, stopping).await;
                }
            }
        }
    }

    /// Turns the connection away (the server is full): a plaintext client is told why, as
    /// memcached tells it; a TLS client, which could not read a plaintext line, is closed.
    pub(crate) fn refuse(self) {
        async fn tell(mut stream: impl tokio::io::AsyncWrite + Unpin) {
            let write = stream.write_all(reply::TOO_MANY_CONNECTIONS);
            let _ = tokio::time::timeout(std::time::Duration::from_secs(1), write).await;
        }
        match self {
            Accepted::Tcp(stream) => {
                tokio::spawn(tell(stream));
            }
            Accepted::Unix(stream) => {
                tokio::spawn(tell(stream));
            }
            Accepted::Tls(..) => {}
        }
    }
}

/// The socket file a unix listener created, removed when dropped if it is still that one.
pub(crate) struct SocketFile {
    path: PathBuf,
    /// Device and inode of the file we bound: another process may have replaced it since.
    identity: (u64, u64),
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        if let Ok(metadata) = std::fs::symlink_metadata(&self.path) {
            if metadata.file_type().is_socket() && (metadata.dev(), metadata.ino()) == self.identity {
                let _ = std::fs::remove_file(&self.path);
            }
        }
    }
}

/// Binds a unix socket at `socket.path` with mode `socket.mode`.
fn bind_unix(socket: &UnixSocket) -> Result<(UnixListener, SocketFile)> {
    let path = &socket.path;
    remove_stale_socket(path)?;
    // The umask decides the mode bind gives the file; set it for the bind (as memcached
    // does), so the socket is never reachable more widely than asked. The umask is the
    // process's, but nothing else creates files while the server starts.
    let mask = !socket.mode & 0o777;
    // SAFETY: umask only swaps the process's file creation mask and cannot fail.
    let previous = unsafe { libc::umask(mask as libc::mode_t) };
    let bound = UnixListener::bind(path);
    // SAFETY: as above; puts the previous mask back.
    unsafe { libc::umask(previous) };
    let listener = bound.map_err(|e| Error::io(format!("-s/--unix-socket: binding {}", path.display()), e))?;
    // bind applies the umask to 0777; make the mode exactly the one asked in any case.
    let permissions = std::fs::Permissions::from_mode(socket.mode & 0o777);
    std::fs::set_permissions(path, permissions)
        .map_err(|e| Error::io(format!("-a/--unix-mask: setting the mode of {}", path.display()), e))?;
    let metadata =
        std::fs::symlink_metadata(path).map_err(|e| Error::io(format!("-s/--unix-socket: {}", path.display()), e))?;
    Ok((listener, SocketFile { path: path.clone(), identity: (metadata.dev(), metadata.ino()) }))
}

/// Removes a socket file left at `path` (by a server that did not stop cleanly); refuses to
/// touch a file of any other type.
fn remove_stale_socket(path: &Path) -> Result<()> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(format!("-s/--unix-socket: {}", path.display()), e)),
        Ok(metadata) if metadata.file_type().is_socket() => std::fs::remove_file(path)
            .map_err(|e| Error::io(format!("-s/--unix-socket: removing the stale socket {}", path.display()), e)),
        Ok(_) => Err(Error::invalid(format!(
            "-s/--unix-socket: {} exists and is not a socket; it is left alone (remove it or choose another path)",
            path.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]

    use super::*;

    #[test]
    fn a_regular_file_is_never_removed_and_a_stale_socket_is() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("data");
        std::fs::write(&file, b"precious").unwrap();
        let error = remove_stale_socket(&file).unwrap_err();
        assert!(error.message().contains("is not a socket"), "{error}");
        assert_eq!(std::fs::read(&file).unwrap(), b"precious");
        let socket = dir.path().join("stale.sock");
        drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
        assert!(socket.exists());
        remove_stale_socket(&socket).unwrap();
        assert!(!socket.exists());
        remove_stale_socket(&socket).unwrap();
    }
}
