//! `kura restore` of a memory snapshot: every block whose checksum holds is read, whatever
//! the header, the trailer or the blocks around it say, so a damaged byte costs the records
//! of its own block only (docs/memory.md, "Salvage"). A snapshot holds each key once (it is
//! one state of the database, written whole), so every record of an intact block is the
//! key's value at the save: no older value can come back.

use super::snapshot::{
    block_at, block_records, header_params, trailer, Snapshot, Trailer, BLOCK_MAGIC, HEADER_LEN, MAGIC, VERSION,
};
use crate::engine::RestoreReport;
use crate::error::{Error, Result};

/// A damaged (or sound) snapshot, read as far as its checksums allow.
pub struct Salvage<'a> {
    bytes: &'a [u8],
    /// The parameters, from whichever copy (header, trailer) is intact.
    params: Option<&'a str>,
    /// Where the blocks start (after an intact header; else past the fixed header, the scan
    /// finding the first block).
    start: usize,
    trailer: Option<Trailer<'a>>,
    /// A version 1 or 2 file whose one checksum holds.
    whole: Option<Snapshot<'a>>,
    /// What the header and trailer cost, for the report.
    notes: Vec<String>,
}

fn utf8(bytes: &[u8]) -> Option<&str> {
    std::str::from_utf8(bytes).ok()
}

impl<'a> Salvage<'a> {
    /// Reads what the checksums prove of `bytes`. A version 1 or 2 file (one checksum over
    /// the whole file) is salvaged whole or not at all: without blocks, no part of a damaged
    /// one can be proven intact.
    pub fn read(bytes: &'a [u8]) -> Result<Salvage<'a>> {
        let version = bytes.get(MAGIC.len()).copied();
        let header = header_params(bytes);
        let trailer = trailer(bytes);
        if header.is_none() && trailer.is_none() && version != Some(VERSION) {
            let whole = Snapshot::read(bytes).map_err(|e| {
                Error::broken(format!(
                    "{}; a memory snapshot before format version 3 has one checksum over the whole file, so no \
                     record of a damaged one can be proven intact",
                    e.message()
                ))
            })?;
            let params = Some(whole.params());
            return Ok(Salvage { bytes, params, start: 0, trailer: None, whole: Some(whole), notes: Vec::new() });
        }
        let mut notes = Vec::new();
        let params = match (header, &trailer) {
            (Some((params, _)), _) => utf8(params),
            (None, Some(trailer)) => {
                notes.push("the header is damaged: its parameters were taken from the trailer's copy".to_string());
                utf8(trailer.params)
            }
            (None, None) => {
                notes.push(
                    "the header and the trailer are damaged: the parameters are lost (a CacheDbm needs cap_rec_num \
                     at its next open)"
                        .to_string(),
                );
                None
            }
        };
        let start = header.map_or(HEADER_LEN, |(_, end)| end);
        Ok(Salvage { bytes, params, start, trailer, whole: None, notes })
    }

    /// The parameters the snapshot stored, if a copy of them is intact.
    pub fn params(&self) -> Option<&'a str> {
        self.params
    }

    /// Calls `visit` on every record of every intact block, in file order, and reports what
    /// was kept and dropped.
    pub fn records(&self, mut visit: impl FnMut(&[u8], &[u8]) -> Result<()>) -> Result<RestoreReport> {
        if let Some(whole) = &self.whole {
            let records = whole.records(visit)?;
            return Ok(RestoreReport { records, ..RestoreReport::default() });
        }
        let end = self.trailer.as_ref().map_or(self.bytes.len(), |t| t.start);
        let (mut at, mut records, mut blocks) = (self.start, 0u64, 0u64);
        let (mut stretches, mut damaged_bytes) = (0u64, 0usize);
        while at < end {
            if let Some(block) = block_at(self.bytes, at, end) {
                if block_records(&block, &mut visit)? {
                    records += u64::from(block.count);
                    blocks += 1;
                    at = block.end;
                    continue;
                }
            }
            let next = self.next_block(at + 1, end);
            stretches += 1;
            damaged_bytes += next - at;
            at = next;
        }
        let mut report = RestoreReport { records, dropped: self.notes.clone(), ..RestoreReport::default() };
        match &self.trailer {
            Some(trailer) => {
                report.dropped_records = trailer.records.saturating_sub(records);
                if stretches > 0 {
                    report.dropped.push(format!(
                        "{} of {} blocks damaged ({damaged_bytes} bytes in {stretches} stretches): their records \
                         dropped",
                        trailer.blocks.saturating_sub(blocks),
                        trailer.blocks,
                    ));
                }
            }
            None => report.dropped.push(format!(
                "the trailer is damaged or the file cut short: {damaged_bytes} bytes in {stretches} damaged stretches \
                 dropped, holding an unknown number of records"
            )),
        }
        Ok(report)
    }

    /// The first offset at or after `from` where an intact block starts, else `end`.
    fn next_block(&self, from: usize, end: usize) -> usize {
        let area = self.bytes.get(from..end).unwrap_or_default();
        area.windows(BLOCK_MAGIC.len())
            .enumerate()
            .filter(|(_, window)| window == BLOCK_MAGIC)
            .map(|(i, _)| from + i)
            .find(|at| block_at(self.bytes, *at, end).is_some())
            .unwrap_or(end)
    }
}
