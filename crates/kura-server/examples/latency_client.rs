//! A small latency client for bench/server.py: memcaslap prints average latencies only, so
//! this one records the time of every request and prints p50 and p99, for any server that
//! speaks memcached's text protocol (kura serve and memcached take turns under it).
//!
//! `latency_client HOST:PORT CONNECTIONS SECONDS GET_SHARE [KEYS] [VALUE_BYTES]`: loads KEYS
//! keys (default 10000) of VALUE_BYTES bytes (default 100), then each of CONNECTIONS
//! connections sends one request at a time (a get with probability GET_SHARE, else a set, on
//! a random key), waits for the whole reply and records how long it took, for SECONDS.
//! Prints one JSON line: `{"ops":..,"errors":..,"p50_us":..,"p99_us":..}`. An error is a reply
//! other than the one expected (a miss counts as a hit would: a get's reply is complete at
//! `END\r\n` either way).

use std::error::Error;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

type Failure = Box<dyn Error + Send + Sync>;

/// What one connection measured.
#[derive(Default)]
struct Tally {
    nanos: Vec<u64>,
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
        (None, None) => {
            Err("usage: latency_client HOST:PORT CONNECTIONS SECONDS GET_SHARE [KEYS] [VALUE_BYTES]".into())
        }
    }
}

/// Reads until the reply in `buffer` ends with `terminator`; false if the server closed first.
async fn read_reply(stream: &mut TcpStream, buffer: &mut Vec<u8>, terminator: &[u8]) -> Result<bool, Failure> {
    buffer.clear();
    let mut chunk = [0u8; 4096];
    while !buffer.ends_with(terminator) {
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            return Ok(false);
        }
        buffer.extend_from_slice(chunk.get(..read).unwrap_or_default());
    }
    Ok(true)
}

fn set_request(key: u64, value: &[u8]) -> Vec<u8> {
    let mut request = format!("set lat:{key} 0 0 {}\r\n", value.len()).into_bytes();
    request.extend_from_slice(value);
    request.extend_from_slice(b"\r\n");
    request
}

async fn load(address: &str, keys: u64, value: &[u8]) -> Result<(), Failure> {
    let mut stream = TcpStream::connect(address).await?;
    let mut buffer = Vec::new();
    for key in 0..keys {
        stream.write_all(&set_request(key, value)).await?;
        if !read_reply(&mut stream, &mut buffer, b"\r\n").await? || buffer != b"STORED\r\n" {
            return Err(format!("loading key {key}: {:?}", String::from_utf8_lossy(&buffer)).into());
        }
    }
    Ok(())
}

async fn connection(
    address: String,
    seed: u64,
    deadline: Instant,
    get_share: f64,
    keys: u64,
    value: Vec<u8>,
) -> Result<Tally, Failure> {
    let mut stream = TcpStream::connect(&address).await?;
    stream.set_nodelay(true)?;
    let mut draws = Draws(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut tally = Tally::default();
    let mut buffer = Vec::new();
    while Instant::now() < deadline {
        let draw = draws.next();
        let key = draw % keys;
        let is_get = ((draw >> 40) as f64 / (1u64 << 24) as f64) < get_share;
        let started = Instant::now();
        let complete = if is_get {
            stream.write_all(format!("get lat:{key}\r\n").as_bytes()).await?;
            read_reply(&mut stream, &mut buffer, b"END\r\n").await?
        } else {
            stream.write_all(&set_request(key, &value)).await?;
            read_reply(&mut stream, &mut buffer, b"\r\n").await? && buffer == b"STORED\r\n"
        };
        tally.nanos.push(u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX));
        if !complete {
            tally.errors += 1;
            if buffer.is_empty() {
                break;
            }
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
    let address = argument(1, None)?;
    let connections: u64 = argument(2, None)?.parse()?;
    let seconds: f64 = argument(3, None)?.parse()?;
    let get_share: f64 = argument(4, None)?.parse()?;
    let keys: u64 = argument(5, Some("10000"))?.parse::<u64>()?.max(1);
    let value = vec![b'v'; argument(6, Some("100"))?.parse()?];
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let tally = runtime.block_on(async move {
        load(&address, keys, &value).await?;
        let deadline = Instant::now() + Duration::from_secs_f64(seconds);
        let tasks: Vec<_> = (0..connections)
            .map(|seed| tokio::spawn(connection(address.clone(), seed + 1, deadline, get_share, keys, value.clone())))
            .collect();
        let mut total = Tally::default();
        for task in tasks {
            let tally = task.await??;
            total.nanos.extend(tally.nanos);
            total.errors += tally.errors;
        }
        Ok::<Tally, Failure>(total)
    })?;
    let mut nanos = tally.nanos;
    nanos.sort_unstable();
    println!(
        "{{\"ops\":{},\"errors\":{},\"p50_us\":{:.1},\"p99_us\":{:.1}}}",
        nanos.len(),
        tally.errors,
        quantile_us(&nanos, 0.50),
        quantile_us(&nanos, 0.99)
    );
    Ok(())
}
