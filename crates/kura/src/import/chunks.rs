//! The reader of an import: cuts the input into large chunks that end at a line end.
//!
//! Workers parse whole chunks, so the reader never looks inside a line except to find the
//! last newline of a chunk; a line longer than a chunk makes that chunk longer. Each chunk
//! carries its sequence number (writers apply chunks in this order, so the last line of a
//! repeated key wins) and the number of its first line (for error messages).

use std::io::Read;

use crate::error::{Error, Result};

/// Bytes a chunk holds at least (unless the input ends): large enough that handing one over
/// costs nothing next to parsing it.
pub const CHUNK_BYTES: usize = 1 << 20;

pub struct Chunk {
    pub seq: u64,
    /// The 1-based number of the chunk's first line.
    pub first_line: u64,
    pub bytes: Vec<u8>,
}

pub struct ChunkReader<R> {
    input: R,
    name: String,
    /// The start of a line whose end was not read yet.
    carry: Vec<u8>,
    seq: u64,
    next_line: u64,
    finished: bool,
}

impl<R: Read> ChunkReader<R> {
    pub fn new(input: R, name: String) -> ChunkReader<R> {
        ChunkReader { input, name, carry: Vec::new(), seq: 0, next_line: 1, finished: false }
    }

    /// Whether the input holds a byte at all, read ahead (and kept for the first chunk)
    /// when nothing was read yet: an input that can only be read once (a pipe) can only be
    /// found empty this way.
    pub fn has_input(&mut self) -> Result<bool> {
        while self.carry.is_empty() && !self.finished {
            let read = (&mut self.input)
                .take(64 << 10)
                .read_to_end(&mut self.carry)
                .map_err(|e| Error::io(format!("read {}", self.name), e))?;
            self.finished = read == 0;
        }
        Ok(!self.carry.is_empty())
    }

    /// The next chunk, or None at the end of the input.
    pub fn next_chunk(&mut self) -> Result<Option<Chunk>> {
        let mut bytes = std::mem::take(&mut self.carry);
        let mut searched = 0;
        let mut last_newline = None;
        let cut = loop {
            if let Some(newline) = bytes.get(searched..).and_then(|tail| tail.iter().rposition(|&b| b == b'\n')) {
                last_newline = Some(searched + newline);
            }
            searched = bytes.len();
            if self.finished {
                break bytes.len();
            }
            if let Some(newline) = last_newline.filter(|_| bytes.len() >= CHUNK_BYTES) {
                break newline + 1;
            }
            let want = CHUNK_BYTES.saturating_sub(bytes.len()).max(64 << 10);
            let read = (&mut self.input)
                .take(want as u64)
                .read_to_end(&mut bytes)
                .map_err(|e| Error::io(format!("read {}", self.name), e))?;
            if read == 0 {
                self.finished = true;
            }
        };
        if bytes.is_empty() {
            return Ok(None);
        }
        self.carry = bytes.split_off(cut.min(bytes.len()));
        let lines = super::newlines::count(&bytes) + u64::from(!bytes.ends_with(b"\n"));
        let chunk = Chunk { seq: self.seq, first_line: self.next_line, bytes };
        self.seq += 1;
        self.next_line += lines;
        Ok(Some(chunk))
    }
}

/// The lines of a chunk with their numbers, without their newlines.
pub fn lines(chunk: &Chunk) -> impl Iterator<Item = (u64, &[u8])> {
    let body = chunk.bytes.strip_suffix(b"\n").unwrap_or(&chunk.bytes);
    body.split(|&b| b == b'\n').zip(chunk.first_line..).map(|(line, number)| (number, line))
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]
    #![expect(clippy::indexing_slicing, reason = "the lines are indexed by construction")]
    use super::*;

    #[test]
    fn chunks_end_at_line_ends_and_number_every_line_once() {
        let mut text = Vec::new();
        for i in 0..200_000u32 {
            text.extend_from_slice(format!("key{i}\t{}\n", "v".repeat((i % 13) as usize)).as_bytes());
        }
        text.extend_from_slice(&vec![b'x'; 3 * CHUNK_BYTES]); // a long last line, no newline
        let mut reader = ChunkReader::new(text.as_slice(), "test".into());
        let mut seen = Vec::new();
        let mut expected_seq = 0;
        while let Some(chunk) = reader.next_chunk().unwrap() {
            assert_eq!(chunk.seq, expected_seq);
            expected_seq += 1;
            for (number, line) in lines(&chunk) {
                seen.push((number, line.to_vec()));
            }
        }
        assert!(expected_seq > 3, "the input was cut");
        let original: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
        assert_eq!(seen.len(), original.len());
        for (index, (number, line)) in seen.iter().enumerate() {
            assert_eq!(*number, index as u64 + 1);
            assert_eq!(line.as_slice(), original[index]);
        }
        assert!(ChunkReader::new(&b""[..], "empty".into()).next_chunk().unwrap().is_none());
    }
}
