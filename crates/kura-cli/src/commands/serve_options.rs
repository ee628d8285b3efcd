//! `kura serve`'s option values as memcached's command line means them: sizes with their
//! units (`-m` in megabytes when bare, `-I` in bytes), the bounds a cache can use, and the
//! `-o key=value,...` extended options (memcached's `ssl_*` ones through
//! `kura_server::tls::apply_ssl_option`). Kept apart from `serve.rs` so that each can be read
//! (and tested) on its own, and so that a new `-o` key is one line of `EXTENDED`.

use std::time::Duration;

use kura_server::tls::apply_ssl_option;
use kura_server::{Config, TlsConfig};

/// The smallest memory limit accepted: below it no cache holds anything useful (memcached's
/// smallest `-m` is 1 as well).
pub const MIN_MEMORY_LIMIT: u64 = 1 << 20;
/// memcached's bounds on `-I`: 1 KiB to 1 GiB.
pub const MIN_ITEM_SIZE: u64 = 1 << 10;
pub const MAX_ITEM_SIZE: u64 = 1 << 30;

/// A size: digits, then optionally a unit: `K M G T` or `KiB MiB GiB TiB` (any case; all
/// powers of 1024), or `B` for bytes. A bare number counts in `bare_unit` bytes: megabytes for
/// `-m` (as memcached), bytes for `-I` (as memcached). memcached's own `-m` reads the leading
/// digits only, so there `-m 2g` is 2 MB; here it is 2 GiB.
pub fn parse_size(text: &str, bare_unit: u64) -> Result<u64, String> {
    let text = text.trim();
    let digits_end = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (digits, unit) = text.split_at(digits_end);
    if digits.is_empty() {
        return Err(format!("{text:?} is not a size (a number, then K, M, G, T, KiB, MiB, GiB or TiB)"));
    }
    let multiplier = match unit.to_ascii_lowercase().as_str() {
        "" => bare_unit,
        "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        _ => return Err(format!("{text:?} has an unknown unit (known: K, M, G, T, KiB, MiB, GiB, TiB, B)")),
    };
    let number: u64 = digits.parse().map_err(|_| format!("{text:?} is too large"))?;
    number.checked_mul(multiplier).ok_or_else(|| format!("{text:?} is too large"))
}

/// Checks the memory limit and the item size together, as memcached refuses values no cache
/// can use. `bounded`: the engine is held to the memory limit (a file engine is not, so its
/// items may be larger than the limit).
pub fn check_sizes(memory_limit: u64, max_item_size: u64, bounded: bool) -> Result<(), String> {
    if memory_limit < MIN_MEMORY_LIMIT {
        return Err(format!(
            "--memory-limit (-m) of {memory_limit} bytes is below 1 MiB, too little for any cache \
             (a bare number counts megabytes, as memcached's -m)"
        ));
    }
    if max_item_size < MIN_ITEM_SIZE {
        return Err(format!("--max-item-size (-I) of {max_item_size} bytes is below memcached's least, 1 KiB"));
    }
    if max_item_size > MAX_ITEM_SIZE {
        return Err(format!("--max-item-size (-I) of {max_item_size} bytes is above memcached's most, 1 GiB"));
    }
    if bounded && max_item_size > memory_limit {
        return Err(format!(
            "--max-item-size (-I) of {max_item_size} bytes is above the memory limit of {memory_limit} \
             bytes: no such item would fit (raise -m or lower -I)"
        ));
    }
    Ok(())
}

/// One `-o` key: its name, whether it takes `=value`, what it does, and how it is applied.
struct Extended {
    name: &'static str,
    takes_value: bool,
    what: &'static str,
    apply: fn(&mut Config, &str) -> Result<(), String>,
}

/// The `-o` keys `kura serve` takes. memcached has many more (slab, LRU and hash tuning, which
/// mean nothing here): they are refused by name rather than silently ignored, so a flag line
/// never promises something it does not do. To take a new key, add a line.
const EXTENDED: &[Extended] = &[
    Extended {
        name: "idle_timeout",
        takes_value: true,
        what: "close connections idle this many seconds (0: never), as --idle-timeout",
        apply: |config, value| {
            let seconds: u64 = value.parse().map_err(|_| format!("idle_timeout={value}: not a number of seconds"))?;
            config.idle_timeout = (seconds > 0).then(|| Duration::from_secs(seconds));
            Ok(())
        },
    },
    Extended {
        name: "maxconns_fast",
        takes_value: false,
        what: "refuse a connection over the limit at once (what kura serve always does)",
        apply: |_, _| Ok(()),
    },
];

/// Applies every `-o` argument (each a comma-separated list of `key` or `key=value`) to
/// `config`, in order; an unknown key, a missing or unexpected value is a clear error.
/// memcached's `ssl_*` keys go to the TLS settings returned, which `-Z` turns on
/// (`serve_listen.rs`).
pub fn apply_extended(config: &mut Config, arguments: &[String]) -> Result<TlsConfig, String> {
    let mut tls = TlsConfig::default();
    for option in arguments.iter().flat_map(|argument| argument.split(',')).filter(|o| !o.is_empty()) {
        let (name, value) = match option.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (option, None),
        };
        if apply_ssl_option(name, value.unwrap_or_default(), &mut tls).map_err(|e| e.message().to_string())? {
            continue;
        }
        let Some(known) = EXTENDED.iter().find(|known| known.name == name) else {
            let names: Vec<&str> = EXTENDED.iter().map(|known| known.name).collect();
            return Err(format!(
                "-o {name}: unknown or not supported by kura serve (it takes: {}, and ssl_chain_cert, ssl_key, \
                 ssl_ca_cert, ssl_verify_mode, ssl_min_version with -Z)",
                names.join(", ")
            ));
        };
        match (known.takes_value, value) {
            (true, Some(value)) => (known.apply)(config, value)?,
            (false, None) => (known.apply)(config, "")?,
            (true, None) => return Err(format!("-o {name} needs a value: {name}=VALUE ({})", known.what)),
            (false, Some(_)) => return Err(format!("-o {name} takes no value ({})", known.what)),
        }
    }
    Ok(tls)
}

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "a test fails loudly on the first broken expectation")]

    use super::*;

    const MB: u64 = 1 << 20;

    #[test]
    fn sizes_take_memcached_and_binary_units() {
        for (text, bytes) in [
            ("64", 64 * MB),
            ("1024", 1024 * MB),
            ("512K", 512 << 10),
            ("512kib", 512 << 10),
            ("1G", 1 << 30),
            ("1GiB", 1 << 30),
            ("2g", 2 << 30),
            ("1T", 1 << 40),
            ("1TiB", 1 << 40),
            ("100MiB", 100 * MB),
            ("4096B", 4096),
        ] {
            assert_eq!(parse_size(text, MB), Ok(bytes), "{text}");
        }
        assert_eq!(parse_size("1048576", 1), Ok(MB), "-I counts bytes when bare");
        assert_eq!(parse_size("2m", 1), Ok(2 * MB));
        for bad in ["", "M", "1.5G", "1GB", "1X", "-1", "99999999999999999999", "16777216T"] {
            assert!(parse_size(bad, MB).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn sizes_no_cache_can_use_are_refused() {
        assert!(check_sizes(MB, MB, true).is_ok());
        assert!(check_sizes(MB - 1, 1024, true).unwrap_err().contains("below 1 MiB"));
        assert!(check_sizes(64 * MB, 1023, true).unwrap_err().contains("1 KiB"));
        assert!(check_sizes(4 << 30, (1 << 30) + 1, true).unwrap_err().contains("1 GiB"));
        assert!(check_sizes(64 * MB, 65 * MB, true).unwrap_err().contains("memory limit"));
        assert!(check_sizes(64 * MB, 65 * MB, false).is_ok(), "a file engine is not held to the memory limit");
    }

    #[test]
    fn extended_options_apply_or_are_refused_by_name() {
        let mut config = Config::default();
        let tls = apply_extended(&mut config, &["idle_timeout=30,maxconns_fast".to_string()]).unwrap();
        assert_eq!(config.idle_timeout, Some(Duration::from_secs(30)));
        assert_eq!(tls, TlsConfig::default());
        apply_extended(&mut config, &["idle_timeout=0".to_string()]).unwrap();
        assert_eq!(config.idle_timeout, None);
        for (bad, says) in [
            ("hashpower=20", "-o hashpower: unknown"),
            ("idle_timeout", "needs a value"),
            ("idle_timeout=x", "not a number"),
            ("maxconns_fast=1", "takes no value"),
            ("ssl_ciphers=HIGH", "-o ssl_ciphers: not supported"),
            ("ssl_verify_mode=4", "ssl_verify_mode"),
        ] {
            let error = apply_extended(&mut config, &[bad.to_string()]).unwrap_err();
            assert!(error.contains(says), "{bad}: {error}");
        }
    }

    #[test]
    fn ssl_options_go_to_the_tls_settings_beside_the_others() {
        let mut config = Config::default();
        let arguments =
            ["ssl_chain_cert=/c.pem,idle_timeout=5".to_string(), "ssl_key=/k.pem,ssl_verify_mode=2".to_string()];
        let tls = apply_extended(&mut config, &arguments).unwrap();
        assert_eq!(config.idle_timeout, Some(Duration::from_secs(5)));
        assert_eq!(tls.cert.as_deref(), Some(std::path::Path::new("/c.pem")));
        assert_eq!(tls.key.as_deref(), Some(std::path::Path::new("/k.pem")));
        assert_eq!(tls.verify_mode, kura_server::tls::VerifyMode::Require);
        assert!(config.tls.is_none(), "-Z, not -o, turns TLS on");
    }
}
