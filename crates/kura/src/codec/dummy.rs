//! `dummy`, a codec that only the library's unit tests have: run-length pairs (a count of
//! 1 to 255, then the byte). It is one file plus one entry in `registry.rs`, as every codec
//! is, and the test below runs every engine that takes a codec with it: no engine names a
//! codec, so none needed a change for it.

use super::algorithm::{corrupt, Algorithm};
use super::{CodecKind, Effort};
use crate::error::Result;

pub struct Dummy;

impl Algorithm for Dummy {
    fn compress(&self, raw: &[u8], _effort: Effort, out: &mut Vec<u8>) -> Result<()> {
        let mut rest = raw;
        while let Some(&byte) = rest.first() {
            let run = rest.iter().take(255).take_while(|&&b| b == byte).count();
            out.extend([run as u8, byte]);
            rest = rest.get(run..).unwrap_or_default();
        }
        Ok(())
    }

    fn decompress(&self, body: &[u8], raw_len: usize, out: &mut Vec<u8>) -> Result<()> {
        for pair in body.chunks(2) {
            let &[run, byte] = pair else { return Err(corrupt(CodecKind::Dummy, "a count without its byte")) };
            if run == 0 || out.len() + usize::from(run) > raw_len {
                return Err(corrupt(CodecKind::Dummy, format!("a run of {run} beyond {raw_len} bytes")));
            }
            out.extend(std::iter::repeat_n(byte, usize::from(run)));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]

    use std::collections::BTreeMap;

    use crate::dbm::{OpenMode, Params};
    use crate::registry::ENGINES;

    /// Every engine that takes a codec stores and returns a model's records with the dummy,
    /// across a close and reopen, and a shard set of each does too.
    #[test]
    fn every_engine_with_a_codec_runs_the_dummy_unchanged() {
        let dir = tempfile::tempdir().unwrap();
        let model: BTreeMap<Vec<u8>, Vec<u8>> = (0..300u32)
            .map(|i| (format!("key{i:05}").into_bytes(), format!("value {i} ").repeat(1 + i as usize % 7).into_bytes()))
            .collect();
        let mut runs = 0;
        for engine in ENGINES {
            let Some(codec_param) = engine.codec_param else { continue };
            let params = engine.bench_params(1000).with(codec_param, "dummy");
            let sharded =
                Params::new().with("num_shards", 2).with("inner_engine", engine.name).with(codec_param, "dummy");
            let shard = ENGINES.iter().find(|e| e.shard_set).unwrap();
            for (which, opened, params) in [("alone", engine, params), ("sharded", shard, sharded)] {
                let path = dir.path().join(format!("{}-{which}.{}", engine.name, engine.extension));
                let db = opened.open(&path, OpenMode::Create, &params).unwrap();
                for (key, value) in &model {
                    db.set(key, value, true).unwrap();
                }
                db.close().unwrap();
                let db = opened.open(&path, OpenMode::ReadOnly, &Params::new()).unwrap();
                for (key, value) in &model {
                    assert_eq!(&db.get(key).unwrap(), value, "{} {which}", engine.name);
                }
                assert_eq!(db.count().unwrap(), model.len() as u64, "{} {which}", engine.name);
                db.close().unwrap();
                runs += 1;
            }
        }
        assert!(runs >= 6, "only {runs} engines with a codec parameter");
    }
}
