//! The project's load generator for memcached-protocol servers (bench/server.py): kura serve
//! and memcached take turns under it. It exists because memcaslap's figures cannot be
//! trusted: it counts error replies as completed transactions, so when kura serve refused
//! its keys (they begin with eight 0x10 control bytes, which kura serve now stores as
//! memcached does) it measured refusals (docs/server.md, "The load generator"). This client
//! uses printable keys, parses every reply and counts anything but the expected reply as an
//! error, so a figure it prints is a figure of served requests.
//!
//! `load_client HOST:PORT CONNECTIONS SECONDS GET_SHARE [KEYS] [VALUE_BYTES] [KEYS_PER_GET]
//! [REQUESTS]`: stores KEYS keys (`load:0` …, default 10000) of VALUE_BYTES bytes (default
//! 100) with pipelined sets, then each of CONNECTIONS connections sends one request at a
//! time, a `get` of KEYS_PER_GET random keys (default 1) with probability GET_SHARE, else a
//! `set` of one random key, and times it, for SECONDS or until REQUESTS requests in all (when
//! given and not 0) were sent. A get's reply must hold, in the order asked, a VALUE block for
//! some of the keys asked, each with the stored value, then `END`; a set's reply `STORED`.
//! Prints one JSON line:
//! `{"requests":..,"keys":..,"hits":..,"errors":..,"seconds":..,"p50_us":..,"p99_us":..}`
//! (`keys`: keys asked for by gets; `hits`: VALUE blocks received).
//!
//! With `LOAD_CLIENT_TLS_CA=FILE` (a PEM CA certificate), every connection is TLS, the
//! server's certificate checked against that CA for the name `localhost`: for the TLS rows
//! of bench/server.py (kura serve and memcached both with `-Z`).

use std::error::Error;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{self, RootCertStore};
use tokio_rustls::TlsConnector;

type Failure = Box<dyn Error + Send + Sync>;

const USAGE: &str =
    "usage: load_client HOST:PORT CONNECTIONS SECONDS GET_SHARE [KEYS] [VALUE_BYTES] [KEYS_PER_GET] [REQUESTS]";

/// Sets sent before their replies are read while the keys are stored.
const PRELOAD_PIPELINE: u64 = 256;

/// What the run is asked to do, from the command line.
#[derive(Clone)]
struct Load {
    address: String,
    connections: u64,
    seconds: f64,
    get_share: f64,
    keys: u64,
    value: Vec<u8>,
    keys_per_get: usize,
    requests: u64,
    /// Set by `LOAD_CLIENT_TLS_CA`: every connection speaks TLS.
    tls: Option<TlsConnector>,
}

/// What one connection measured.
#[derive(Default)]
struct Tally {
    nanos: Vec<u64>,
    keys: u64,
    hits: u64,
    errors: u64,
}

/// A tiny xorshift generator: the client needs cheap, roughly uniform draws, nothing more.
struct Draws(u64);

impl Draws {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn argument(index: usize, default: Option<&str>) -> Result<String, Failure> {
    match (std::env::args().nth(index), default) {
        (Some(value), _) => Ok(value),
        (None, Some(default)) => Ok(default.to_string()),
        (None, None) => Err(USAGE.into()),
    }
}

impl Load {
    fn from_arguments() -> Result<Self, Failure> {
        Ok(Self {
            address: argument(1, None)?,
            connections: argument(2, None)?.parse::<u64>()?.max(1),
            seconds: argument(3, None)?.parse()?,
            get_share: argument(4, None)?.parse()?,
            keys: argument(5, Some("10000"))?.parse::<u64>()?.max(1),
            value: vec![b'v'; argument(6, Some("100"))?.parse()?],
            keys_per_get: argument(7, Some("1"))?.parse::<usize>()?.max(1),
            requests: argument(8, Some("0"))?.parse()?,
            tls: std::env::var("LOAD_CLIENT_TLS_CA").ok().map(|ca| tls_connector(&ca)).transpose()?,
        })
    }
}

fn key_name(key: u64) -> String {
    format!("load:{key}")
}

fn set_request(request: &mut Vec<u8>, key: u64, value: &[u8]) {
    request.extend_from_slice(format!("set {} 0 0 {}\r\n", key_name(key), value.len()).as_bytes());
    request.extend_from_slice(value);
    request.extend_from_slice(b"\r\n");
}

/// A TLS client trusting only the CA in `ca_file` (PEM).
fn tls_connector(ca_file: &str) -> Result<TlsConnector, Failure> {
    let mut roots = RootCertStore::empty();
    for certificate in CertificateDer::pem_file_iter(ca_file).map_err(|e| format!("{ca_file}: {e}"))? {
        roots.add(certificate.map_err(|e| format!("{ca_file}: {e}"))?)?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(TlsConnector::from(Arc::new(config)))
}

type Reader = BufReader<Box<dyn AsyncRead + Unpin + Send>>;
type Writer = Box<dyn AsyncWrite + Unpin + Send>;

/// One connection: a buffered reader for replies, the write half for requests.
struct Connection {
    reader: Reader,
    writer: Writer,
    line: Vec<u8>,
}

impl Connection {
    async fn open(load: &Load) -> Result<Self, Failure> {
        let stream = TcpStream::connect(&load.address).await?;
        stream.set_nodelay(true)?;
        let (reader, writer): (Box<dyn AsyncRead + Unpin + Send>, Writer) = match &load.tls {
            None => {
                let (reader, writer) = stream.into_split();
                (Box::new(reader), Box::new(writer))
            }
            Some(connector) => {
                let stream = connector.connect(ServerName::try_from("localhost")?, stream).await?;
                let (reader, writer) = tokio::io::split(stream);
                (Box::new(reader), Box::new(writer))
            }
        };
        Ok(Self { reader: BufReader::with_capacity(64 * 1024, reader), writer, line: Vec::new() })
    }

    /// Reads one reply line into `self.line` (CRLF included); an error if the server closed.
    async fn read_line(&mut self) -> Result<(), Failure> {
        self.line.clear();
        if self.reader.read_until(b'\n', &mut self.line).await? == 0 {
            return Err("the server closed the connection".into());
        }
        Ok(())
    }

    /// Reads a set's reply: true if it is `STORED`.
    async fn read_stored(&mut self) -> Result<bool, Failure> {
        self.read_line().await?;
        Ok(self.line == b"STORED\r\n")
    }

    /// Reads a get's reply for `asked` keys: the number of VALUE blocks if each names the
    /// next of the asked keys (some may be missing), holds `value` and is followed by `END`;
    /// None if the reply is anything else.
    async fn read_values(&mut self, asked: &[String], value: &[u8]) -> Result<Option<u64>, Failure> {
        let mut next_asked = asked.iter();
        let mut hits = 0;
        let mut data = Vec::new();
        loop {
            self.read_line().await?;
            if self.line == b"END\r\n" {
                return Ok(Some(hits));
            }
            let header = String::from_utf8_lossy(&self.line).into_owned();
            let fields: Vec<&str> = header.trim_end_matches("\r\n").split(' ').collect();
            let [tag, key, _flags, bytes] = fields.as_slice() else { return Ok(None) };
            let Ok(bytes) = bytes.parse::<usize>() else { return Ok(None) };
            if *tag != "VALUE" || !next_asked.any(|asked_key| asked_key == key) || bytes != value.len() {
                return Ok(None);
            }
            data.resize(bytes + 2, 0);
            self.reader.read_exact(&mut data).await?;
            if data.get(..bytes) != Some(value) || data.get(bytes..) != Some(b"\r\n".as_slice()) {
                return Ok(None);
            }
            hits += 1;
        }
    }
}

/// Stores every key with pipelined sets, `PRELOAD_PIPELINE` in flight.
async fn preload(load: &Load) -> Result<(), Failure> {
    let mut connection = Connection::open(load).await?;
    let mut request = Vec::new();
    let mut first = 0;
    while first < load.keys {
        let last = (first + PRELOAD_PIPELINE).min(load.keys);
        request.clear();
        for key in first..last {
            set_request(&mut request, key, &load.value);
        }
        connection.writer.write_all(&request).await?;
        for key in first..last {
            if !connection.read_stored().await? {
                return Err(
                    format!("storing {}: {:?}", key_name(key), String::from_utf8_lossy(&connection.line)).into()
                );
            }
        }
        first = last;
    }
    Ok(())
}

async fn run_connection(load: Load, seed: u64, deadline: Instant, quota: u64) -> Result<Tally, Failure> {
    let mut connection = Connection::open(&load).await?;
    let mut draws = Draws(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut tally = Tally::default();
    let mut request = Vec::new();
    let mut asked = Vec::with_capacity(load.keys_per_get);
    while Instant::now() < deadline && (quota == 0 || (tally.nanos.len() as u64) < quota) {
        let draw = draws.next();
        let is_get = ((draw >> 40) as f64 / (1u64 << 24) as f64) < load.get_share;
        request.clear();
        let started = Instant::now();
        let served = if is_get {
            asked.clear();
            request.extend_from_slice(b"get");
            for _ in 0..load.keys_per_get {
                let name = key_name(draws.next() % load.keys);
                request.push(b' ');
                request.extend_from_slice(name.as_bytes());
                asked.push(name);
            }
            request.extend_from_slice(b"\r\n");
            connection.writer.write_all(&request).await?;
            tally.keys += asked.len() as u64;
            match connection.read_values(&asked, &load.value).await? {
                Some(hits) => {
                    tally.hits += hits;
                    true
                }
                None => false,
            }
        } else {
            set_request(&mut request, draw % load.keys, &load.value);
            connection.writer.write_all(&request).await?;
            connection.read_stored().await?
        };
        tally.nanos.push(u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX));
        if !served {
            // The stream may have lost its place: count the error and start over.
            tally.errors += 1;
            connection = Connection::open(&load).await?;
        }
    }
    Ok(tally)
}

/// The value at quantile `q` of sorted `nanos`, in microseconds.
fn quantile_us(nanos: &[u64], q: f64) -> f64 {
    let last = nanos.len().saturating_sub(1);
    let at = ((last as f64) * q).round() as usize;
    nanos.get(at.min(last)).map_or(0.0, |&n| n as f64 / 1000.0)
}

fn main() -> Result<(), Failure> {
    let load = Load::from_arguments()?;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let (tally, seconds) = runtime.block_on(async move {
        preload(&load).await?;
        let started = Instant::now();
        let deadline = started + Duration::from_secs_f64(load.seconds);
        let quota = load.requests.div_ceil(load.connections);
        let tasks: Vec<_> = (0..load.connections)
            .map(|seed| tokio::spawn(run_connection(load.clone(), seed + 1, deadline, quota)))
            .collect();
        let mut total = Tally::default();
        for task in tasks {
            let tally = task.await??;
            total.nanos.extend(tally.nanos);
            total.keys += tally.keys;
            total.hits += tally.hits;
            total.errors += tally.errors;
        }
        Ok::<_, Failure>((total, started.elapsed().as_secs_f64()))
    })?;
    let mut nanos = tally.nanos;
    nanos.sort_unstable();
    println!(
        "{{\"requests\":{},\"keys\":{},\"hits\":{},\"errors\":{},\"seconds\":{:.3},\"p50_us\":{:.1},\"p99_us\":{:.1}}}",
        nanos.len(),
        tally.keys,
        tally.hits,
        tally.errors,
        seconds,
        quantile_us(&nanos, 0.50),
        quantile_us(&nanos, 0.99)
    );
    Ok(())
}
