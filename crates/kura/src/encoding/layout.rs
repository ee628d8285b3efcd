//! Fixed-size headers as a list of named fields, each placed right after the one before
//! (`Field::after`), so that a header's byte layout is written once, as constants, and a
//! field can neither overlap its neighbour nor be given a literal offset that drifts from the
//! documentation. A field's type carries its header's size `N` and its own width `W`, and its
//! `const` constructors assert that it ends within the header: a field out of range fails the
//! build, a field of another header or a value of another width does not type-check, so
//! reading and writing a field cannot miss at run time.

use crate::error::{Error, Result};

/// Where a `W`-byte field of an `N`-byte header lies. Made only by the `const` constructors,
/// which assert `offset + W <= N` (in a `const` item, at compile time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field<const N: usize, const W: usize> {
    offset: usize,
}

impl<const N: usize, const W: usize> Field<N, W> {
    /// The first field of a header, at offset 0.
    pub const fn first() -> Self {
        Self::at(0)
    }

    /// The field that follows `previous`.
    pub const fn after<const P: usize>(previous: Field<N, P>) -> Self {
        Self::at(previous.end())
    }

    const fn at(offset: usize) -> Self {
        assert!(offset + W <= N, "a header field must end within its header");
        Field { offset }
    }

    /// Where the field starts.
    pub const fn offset(self) -> usize {
        self.offset
    }

    /// The offset just past the field.
    pub const fn end(self) -> usize {
        self.offset + W
    }

    /// The field as an `(offset, size)` row of a format document's table.
    #[cfg(test)]
    pub const fn row(self) -> (usize, usize) {
        (self.offset, W)
    }
}

/// The bytes of one fixed-size header of `N` bytes, written and read field by field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderBytes<const N: usize> {
    bytes: [u8; N],
}

impl<const N: usize> Default for HeaderBytes<N> {
    fn default() -> Self {
        HeaderBytes { bytes: [0; N] }
    }
}

// The slices below are in range: a Field<N, W> ends within the N bytes, which its const
// constructors assert.
impl<const N: usize> HeaderBytes<N> {
    /// A header of zeros (every reserved byte stays zero).
    pub fn new() -> Self {
        Self::default()
    }

    /// The first `N` bytes of `bytes`; BrokenData naming `what` when there are fewer.
    pub fn read(bytes: &[u8], what: &str) -> Result<Self> {
        let head = bytes.get(..N).ok_or_else(|| {
            Error::broken(format!("{what}: {} bytes, fewer than its {N}-byte header: truncated", bytes.len()))
        })?;
        let mut header = Self::new();
        header.bytes.copy_from_slice(head);
        Ok(header)
    }

    /// The bytes of `field`.
    pub fn get<const W: usize>(&self, field: Field<N, W>) -> [u8; W] {
        let mut value = [0; W];
        value.copy_from_slice(&self.bytes[field.offset..field.end()]);
        value
    }

    /// Writes `value` into `field`.
    pub fn put<const W: usize>(&mut self, field: Field<N, W>, value: &[u8; W]) {
        self.bytes[field.offset..field.end()].copy_from_slice(value);
    }

    /// Writes a one-byte field.
    pub fn put_u8(&mut self, field: Field<N, 1>, value: u8) {
        self.put(field, &[value]);
    }

    /// Writes a little-endian `u16` field.
    pub fn put_u16(&mut self, field: Field<N, 2>, value: u16) {
        self.put(field, &value.to_le_bytes());
    }

    /// Writes a little-endian `u32` field.
    pub fn put_u32(&mut self, field: Field<N, 4>, value: u32) {
        self.put(field, &value.to_le_bytes());
    }

    /// Writes a little-endian `u64` field.
    pub fn put_u64(&mut self, field: Field<N, 8>, value: u64) {
        self.put(field, &value.to_le_bytes());
    }

    /// Reads a one-byte field.
    pub fn u8(&self, field: Field<N, 1>) -> u8 {
        u8::from_le_bytes(self.get(field))
    }

    /// Reads a little-endian `u16` field.
    pub fn u16(&self, field: Field<N, 2>) -> u16 {
        u16::from_le_bytes(self.get(field))
    }

    /// Reads a little-endian `u32` field.
    pub fn u32(&self, field: Field<N, 4>) -> u32 {
        u32::from_le_bytes(self.get(field))
    }

    /// Reads a little-endian `u64` field.
    pub fn u64(&self, field: Field<N, 8>) -> u64 {
        u64::from_le_bytes(self.get(field))
    }

    /// The bytes before `field`: what a checksum stored in `field` covers.
    pub fn before<const W: usize>(&self, field: Field<N, W>) -> &[u8] {
        &self.bytes[..field.offset]
    }

    /// The header's bytes.
    pub fn as_bytes(&self) -> &[u8; N] {
        &self.bytes
    }

    /// The header's bytes, by value.
    pub fn into_bytes(self) -> [u8; N] {
        self.bytes
    }
}

/// The `(offset, size)` rows of the first Markdown table after the heading `heading` in a
/// format document, for tests that pin a header layout to its documentation.
#[cfg(test)]
pub fn documented_layout(markdown: &str, heading: &str) -> Vec<(usize, usize)> {
    let after = markdown.split_once(heading).map(|(_, rest)| rest).unwrap_or_default();
    after
        .lines()
        .skip_while(|line| !line.starts_with('|'))
        .take_while(|line| line.starts_with('|'))
        .filter_map(|line| {
            let mut cells = line.split('|').map(str::trim).skip(1);
            let offset = cells.next()?.parse().ok()?;
            let size = cells.next()?.parse().ok()?;
            Some((offset, size))
        })
        .collect()
}

/// The `id name` pairs of a documented codec list such as `0 none, 1 zlib, ...`, found on the
/// first line of `markdown` that contains `marker`.
#[cfg(test)]
pub fn documented_codec_ids(markdown: &str, marker: &str) -> Vec<(u8, String)> {
    let line = markdown.lines().find(|line| line.contains(marker)).unwrap_or_default();
    let words: Vec<&str> =
        line.split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')' || c == '|').collect();
    words
        .windows(2)
        .filter_map(|pair| match pair {
            [id, name] => Some((id.parse().ok()?, name.to_string())),
            _ => None,
        })
        .filter(|(_, name)| crate::codec::CodecKind::from_name(name).is_ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Field<16, 8> = Field::first();
    const B: Field<16, 4> = Field::after(A);
    const C: Field<16, 2> = Field::after(B);

    #[test]
    fn fields_follow_each_other_and_round_trip() {
        assert_eq!([A.row(), B.row(), C.row()], [(0, 8), (8, 4), (12, 2)]);
        let mut header = HeaderBytes::<16>::new();
        header.put(A, b"KuraTest");
        header.put_u32(B, 0xdead_beef);
        header.put_u16(C, 513);
        assert_eq!(&header.get(A), b"KuraTest");
        assert_eq!((header.u32(B), header.u16(C)), (0xdead_beef, 513));
        assert_eq!(header.before(B), b"KuraTest");
        assert_eq!(&header.as_bytes()[12..14], &[1, 2]);
        let read = HeaderBytes::<16>::read(header.as_bytes(), "test").map(|h| h.u16(C));
        assert_eq!(read.ok(), Some(513));
        assert!(HeaderBytes::<16>::read(&[0; 15], "test").is_err());
    }
}
