//! Key comparators: the order of keys in a tree, chosen at creation and recorded in the file.
//!
//! A comparator must be a total order in which two keys compare equal only when they are the
//! same bytes: the tree stores one record per key and finds it by comparison alone. The
//! numeric comparator therefore breaks ties between equal numbers written differently
//! ("1" and "01.0") bytewise.

use std::cmp::Ordering;

use crate::error::{Error, Result};

/// How a tree orders its keys, fixed when the file is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Comparator {
    /// Bytewise, as `memcmp`, shorter first on a common prefix (LevelDB's default).
    #[default]
    Lexical,
    /// Keys are decimal numbers (`-12`, `3.25`, ` 7`), compared by value; text that is not a
    /// number counts from its numeric prefix (none: zero). Equal values fall back to bytes.
    Numeric,
}

impl Comparator {
    /// Every comparator.
    pub const ALL: [Comparator; 2] = [Comparator::Lexical, Comparator::Numeric];

    /// The name in the `key_comparator` parameter.
    pub fn name(self) -> &'static str {
        match self {
            Comparator::Lexical => "lexical",
            Comparator::Numeric => "numeric",
        }
    }

    /// The comparator called `name`; InvalidArgument otherwise.
    pub fn from_name(name: &str) -> Result<Comparator> {
        let wanted = name.trim().to_ascii_lowercase();
        Comparator::ALL
            .into_iter()
            .find(|c| c.name() == wanted || (wanted == "decimal" && *c == Comparator::Numeric))
            .ok_or_else(|| Error::invalid(format!("unknown key comparator {name:?} (known: lexical numeric)")))
    }

    /// The byte stored in the file header.
    pub fn id(self) -> u8 {
        match self {
            Comparator::Lexical => 0,
            Comparator::Numeric => 1,
        }
    }

    /// The comparator a file header's id byte names; BrokenData otherwise.
    pub fn from_id(id: u8) -> Result<Comparator> {
        Comparator::ALL
            .into_iter()
            .find(|c| c.id() == id)
            .ok_or_else(|| Error::broken(format!("unknown key comparator id {id} in the file header")))
    }

    /// The order of keys `a` and `b`.
    #[inline]
    pub fn compare(self, a: &[u8], b: &[u8]) -> Ordering {
        match self {
            Comparator::Lexical => a.cmp(b),
            Comparator::Numeric => compare_decimal(a, b).then_with(|| a.cmp(b)),
        }
    }
}

/// A decimal number as written: sign, integer digits without leading zeros, fraction digits
/// without trailing zeros. Comparing these parts compares the values exactly, at any length.
struct Decimal<'a> {
    negative: bool,
    integer: &'a [u8],
    fraction: &'a [u8],
}

impl Decimal<'_> {
    fn parse(text: &[u8]) -> Decimal<'_> {
        let mut rest = text;
        while let Some((&c, tail)) = rest.split_first() {
            if !c.is_ascii_whitespace() {
                break;
            }
            rest = tail;
        }
        let mut negative = false;
        if let Some((&c, tail)) = rest.split_first() {
            if c == b'-' || c == b'+' {
                negative = c == b'-';
                rest = tail;
            }
        }
        let digits = rest.iter().take_while(|c| c.is_ascii_digit()).count();
        let (mut integer, after) = rest.split_at(digits);
        while let Some((&b'0', tail)) = integer.split_first() {
            integer = tail;
        }
        let mut fraction: &[u8] = &[];
        if let Some((&b'.', tail)) = after.split_first() {
            let digits = tail.iter().take_while(|c| c.is_ascii_digit()).count();
            fraction = tail.get(..digits).unwrap_or_default();
            while let Some((&b'0', head)) = fraction.split_last() {
                fraction = head;
            }
        }
        if integer.is_empty() && fraction.is_empty() {
            negative = false; // -0 is 0
        }
        Decimal { negative, integer, fraction }
    }

    fn magnitude_cmp(&self, other: &Decimal<'_>) -> Ordering {
        self.integer
            .len()
            .cmp(&other.integer.len())
            .then_with(|| self.integer.cmp(other.integer))
            .then_with(|| self.fraction.cmp(other.fraction))
    }
}

fn compare_decimal(a: &[u8], b: &[u8]) -> Ordering {
    let (a, b) = (Decimal::parse(a), Decimal::parse(b));
    match (a.negative, b.negative) {
        (false, true) => Ordering::Greater,
        (true, false) => Ordering::Less,
        (false, false) => a.magnitude_cmp(&b),
        (true, true) => b.magnitude_cmp(&a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn numeric_orders_by_value() {
        let mut keys: Vec<&[u8]> = vec![b"10", b"9", b"-3", b"2.5", b"-10.5", b"0", b"abc", b"002", b"1e3", b"-0"];
        keys.sort_by(|a, b| Comparator::Numeric.compare(a, b));
        let expected: Vec<&[u8]> = vec![b"-10.5", b"-3", b"-0", b"0", b"abc", b"1e3", b"002", b"2.5", b"9", b"10"];
        assert_eq!(keys, expected);
    }

    proptest! {
        #[test]
        fn numeric_matches_integers(a in -100000i64..100000, b in -100000i64..100000) {
            let (x, y) = (a.to_string(), b.to_string());
            prop_assert_eq!(Comparator::Numeric.compare(x.as_bytes(), y.as_bytes()), a.cmp(&b));
        }

        #[test]
        fn orders_are_total(a in proptest::collection::vec(any::<u8>(), 0..6), b in proptest::collection::vec(any::<u8>(), 0..6)) {
            for c in Comparator::ALL {
                let ab = c.compare(&a, &b);
                prop_assert_eq!(ab, c.compare(&b, &a).reverse());
                prop_assert_eq!(ab == Ordering::Equal, a == b);
            }
        }
    }
}
