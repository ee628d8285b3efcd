//! What `Dbm::check` (and `kura check`) reports: how much was read and the damage found.
//!
//! `inspect`'s `healthy` is only the clean-close flag in a header; a check reads every record
//! (and page) and verifies what the engine can verify, so that damage is found before a read
//! trips over it. The report is typed so that the CLI, Python and Ruby print the same facts,
//! and bounded: a file damaged throughout keeps the first `KEPT_PROBLEMS` problems and a
//! count of all of them.

use std::fmt;

/// At most this many problems are kept with their place and message; the rest are counted.
pub const KEPT_PROBLEMS: usize = 20;

/// Where in a database a problem lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// The database as a whole: its header, its file, a count that disagrees.
    Database,
    /// A record at this file offset (HashDbm).
    Record(u64),
    /// The chain of this bucket (HashDbm).
    Bucket(u64),
    /// The page at this file offset (TreeDbm).
    Page(u64),
}

impl fmt::Display for Place {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Place::Database => write!(f, "database"),
            Place::Record(offset) => write!(f, "record at {offset}"),
            Place::Bucket(bucket) => write!(f, "bucket {bucket}"),
            Place::Page(offset) => write!(f, "page at {offset}"),
        }
    }
}

/// One piece of damage found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The part of a composite database it lies in (`shard 1 of 4`), if any.
    pub part: Option<String>,
    /// Where it lies (in that part).
    pub place: Place,
    /// What is wrong there, for people.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(part) = &self.part {
            write!(f, "{part}: ")?;
        }
        write!(f, "{}: {}", self.place, self.message)
    }
}

/// The outcome of a check: clean when no problem was found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// Records read whole and verified.
    pub records: u64,
    /// Pages read and verified (TreeDbm; 0 for the other engines).
    pub pages: u64,
    /// Problems found, all of them counted.
    pub problems: u64,
    /// The first `KEPT_PROBLEMS` problems, in the order found.
    pub first_problems: Vec<Problem>,
}

impl CheckReport {
    /// Whether nothing wrong was found.
    pub fn is_clean(&self) -> bool {
        self.problems == 0
    }

    /// Counts a problem, keeping it if fewer than `KEPT_PROBLEMS` are kept.
    pub fn add(&mut self, place: Place, message: impl Into<String>) {
        self.problems += 1;
        if self.first_problems.len() < KEPT_PROBLEMS {
            self.first_problems.push(Problem { part: None, place, message: message.into() });
        }
    }

    /// Adds the counts and problems of `part` (a shard's report), its problems placed in the
    /// part `label` (`shard 2 of 4`).
    pub fn absorb(&mut self, part: CheckReport, label: &str) {
        self.records += part.records;
        self.pages += part.pages;
        for mut problem in part.first_problems {
            if self.first_problems.len() < KEPT_PROBLEMS {
                problem.part = Some(match problem.part {
                    Some(inner) => format!("{label}: {inner}"),
                    None => label.to_string(),
                });
                self.first_problems.push(problem);
            }
        }
        self.problems += part.problems;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_first_problems_and_counts_them_all() {
        let mut report = CheckReport::default();
        assert!(report.is_clean());
        for i in 0..(KEPT_PROBLEMS as u64 + 5) {
            report.add(Place::Record(i), "checksum mismatch");
        }
        assert_eq!(report.problems, KEPT_PROBLEMS as u64 + 5);
        assert_eq!(report.first_problems.len(), KEPT_PROBLEMS);
        let mut whole = CheckReport { records: 1, ..CheckReport::default() };
        whole.absorb(report, "shard 1 of 2");
        assert_eq!(whole.problems, KEPT_PROBLEMS as u64 + 5);
        assert_eq!(whole.first_problems.len(), KEPT_PROBLEMS);
        let first = whole.first_problems.first().map(ToString::to_string);
        assert_eq!(first.as_deref(), Some("shard 1 of 2: record at 0: checksum mismatch"));
    }
}
