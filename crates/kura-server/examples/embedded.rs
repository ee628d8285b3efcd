//! `kura serve` inside another program: `kura_server` is a library, so an application can
//! serve one of its own databases over memcached's text protocol without a second process.
//! This example binds a server over a TreeDbm file on a free port, talks to it as any
//! memcached client would (`set`, `get`), stops it, and reopens the file to show that the
//! server synchronized and closed the database on its way out. With `--until-signal` it
//! serves instead until SIGINT or SIGTERM through `run_until_signal`, as `kura serve` does.
//! Exists to show both ways of embedding; runs in `make test` (the first way) so that they
//! keep compiling and the first keeps working.
//!
//! Run: `cargo run -p kura-server --example embedded [-- --until-signal]`.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::Arc;

use kura::{open, Dbm, OpenMode, Params};
use kura_server::{run_until_signal, Config, Server};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let scratch = tempfile::tempdir()?;
    let path = scratch.path().join("served.kut");
    let db: Arc<dyn Dbm> = open(&path, OpenMode::Create, &Params::new())?.into();
    // Port 0 picks a free port; the default is memcached's 11211 on 127.0.0.1.
    let config = Config { port: 0, ..Config::default() };

    if std::env::args().any(|arg| arg == "--until-signal") {
        // A runtime of its own, serving until SIGINT (Ctrl-C) or SIGTERM, then closing `db`.
        run_until_signal(config, db, |address| println!("serving {} on {address:?}", path.display()))?;
        return Ok(());
    }

    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let replies = runtime.block_on(async move {
        let server = Server::bind(config, db, 2).await?;
        let address = server.local_addr()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        // A blocking client, as an application's other threads would be; once it is done,
        // the server is told to stop.
        let client = async move {
            let replies = tokio::task::spawn_blocking(move || talk(address)).await;
            let _ = stop.send(());
            replies
        };
        // `run` serves until the future given completes, then drains the connections and
        // synchronizes and closes the database.
        let (served, replies) = tokio::join!(
            server.run(async move {
                let _ = stopped.await;
            }),
            client
        );
        served?;
        let replies = replies??;
        Ok::<_, Box<dyn std::error::Error>>(replies)
    })?;
    assert_eq!(replies, ["STORED", "VALUE greeting 5 5", "hello", "END"]);

    // The server closed the database when it stopped; the record is in the file.
    let reopened = open(&path, OpenMode::ReadOnly, &Params::new())?;
    println!("embedded: the server replied {replies:?}; the file holds {} record(s)", reopened.count()?);
    assert_eq!(reopened.count()?, 1);
    Ok(())
}

/// Stores `greeting` with flags 5 and reads it back: the reply lines, without their CRLF.
fn talk(address: std::net::SocketAddr) -> std::io::Result<Vec<String>> {
    let mut stream = TcpStream::connect(address)?;
    stream.write_all(b"set greeting 5 0 5\r\nhello\r\nget greeting\r\n")?;
    let mut reader = BufReader::new(stream);
    let mut lines = Vec::new();
    while lines.last().map(String::as_str) != Some("END") {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the server closed the connection"));
        }
        lines.push(line.trim_end_matches("\r\n").to_string());
    }
    Ok(lines)
}
