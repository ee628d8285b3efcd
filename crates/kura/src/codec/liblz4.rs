//! The C library liblz4 (Debian's `liblz4-dev`, linked statically by `build.rs`), for its
//! block decoder: on 542-byte dictionary values it decodes in about two thirds of the time
//! `lz4_flex`'s safe decoder takes (`crates/kura-bench/src/bin/lz4_decode.rs`). This module
//! holds all of the codec's `unsafe`: the rest of Kura sees one safe function.
//!
//! `LZ4_decompress_safe` is liblz4's decoder for untrusted input: lz4.h promises that it
//! never reads outside the `srcSize` bytes at `src` nor writes outside the `dstCapacity`
//! bytes at `dst`, whatever the bytes say, and returns a negative number for a malformed
//! block. Its sizes are C `int`s no larger than `LZ4_MAX_INPUT_SIZE`, checked here before
//! every call.

use std::ffi::{c_char, c_int, CStr};

extern "C" {
    fn LZ4_decompress_safe(src: *const c_char, dst: *mut c_char, src_size: c_int, dst_capacity: c_int) -> c_int;
    fn LZ4_versionString() -> *const c_char;
}

/// `LZ4_MAX_INPUT_SIZE` (lz4.h): the largest block, compressed or not, that liblz4 takes.
pub const MAX_BLOCK: usize = 0x7E00_0000;

/// Why `decompress_block` made nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockError {
    /// The block or its capacity is larger than liblz4 takes (`MAX_BLOCK`): decode it another
    /// way.
    TooLarge,
    /// liblz4 found the block malformed, or decoding more than `capacity` bytes, and stopped
    /// at this byte of it.
    Malformed {
        /// The position in the block where the decoder stopped.
        at: usize,
    },
}

/// Decodes the raw LZ4 block `block` into `out` (emptied first), producing at most
/// `capacity` bytes; returns how many it produced (also `out.len()`). `capacity` is what the
/// caller allows to allocate: `out` grows to hold that many bytes and no more than that.
pub fn decompress_block(block: &[u8], capacity: usize, out: &mut Vec<u8>) -> Result<usize, BlockError> {
    if block.len() > MAX_BLOCK || capacity > MAX_BLOCK {
        return Err(BlockError::TooLarge);
    }
    out.clear();
    out.reserve(capacity);
    let spare = out.spare_capacity_mut();
    // `reserve` made room for `capacity` bytes; taking the minimum keeps the bound local.
    let capacity = capacity.min(spare.len());
    let (Ok(src_size), Ok(dst_capacity)) = (c_int::try_from(block.len()), c_int::try_from(capacity)) else {
        return Err(BlockError::TooLarge);
    };
    // SAFETY: `src` points to `block`, readable for `block.len()` = `src_size` bytes; `dst`
    // points to the spare capacity of `out`, writable for `spare.len()` >= `dst_capacity`
    // bytes, and the two do not overlap (`block` is borrowed shared, `out` exclusively). Both
    // sizes were checked to fit a C int and `MAX_BLOCK`. LZ4_decompress_safe reads and writes
    // only within those bounds whatever the block holds (lz4.h), and keeps no pointer.
    let decoded =
        unsafe { LZ4_decompress_safe(block.as_ptr().cast(), spare.as_mut_ptr().cast(), src_size, dst_capacity) };
    let Ok(decoded) = usize::try_from(decoded) else {
        // liblz4 returns -(position + 1) of the byte where decoding stopped.
        let at = usize::try_from(-i64::from(decoded) - 1).unwrap_or(0);
        return Err(BlockError::Malformed { at });
    };
    if decoded > capacity {
        // Never returned by liblz4 (its result is at most `dstCapacity`); refused rather than
        // trusted, since `set_len` below relies on it.
        return Err(BlockError::Malformed { at: block.len() });
    }
    // SAFETY: `out` is empty and liblz4 wrote its first `decoded` bytes (its result counts
    // the bytes written from `dst` on, each a decoded literal or match byte), and `decoded` is
    // at most `capacity` <= `out.capacity()`, checked just above.
    unsafe { out.set_len(decoded) };
    Ok(decoded)
}

/// The version of the linked liblz4, such as "1.9.4".
pub fn version() -> String {
    // SAFETY: LZ4_versionString takes nothing and returns a pointer to a static,
    // NUL-terminated string constant of the library (LZ4_VERSION_STRING), never null.
    let version = unsafe { CStr::from_ptr(LZ4_versionString()) };
    version.to_string_lossy().into_owned()
}
