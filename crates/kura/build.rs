//! Links liblz4, the C library whose block decoder the `lz4` codec calls (src/codec/liblz4.rs),
//! from Debian's `liblz4-dev` (`make deps` installs it). Statically, from the `liblz4.a` in the
//! directory pkg-config gives: the Python and Ruby extensions then carry their own copy
//! (maturin would otherwise have to bundle liblz4.so into the wheel), and no call goes
//! through the PLT. Where there is no static library, the shared one is linked instead.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    let libdir = Command::new("pkg-config")
        .args(["--variable=libdir", "liblz4"])
        .output()
        .ok()
        .filter(|output| output.status.success())
        .and_then(|output| String::from_utf8(output.stdout).ok())
        .map(|libdir| libdir.trim().to_string())
        .filter(|libdir| !libdir.is_empty());
    match libdir {
        Some(libdir) if Path::new(&libdir).join("liblz4.a").is_file() => {
            println!("cargo:rustc-link-search=native={libdir}");
            println!("cargo:rustc-link-lib=static=lz4");
        }
        Some(libdir) => {
            println!("cargo:rustc-link-search=native={libdir}");
            println!("cargo:rustc-link-lib=dylib=lz4");
        }
        None => {
            println!("cargo:warning=pkg-config does not know liblz4: install liblz4-dev (make deps)");
            println!("cargo:rustc-link-lib=dylib=lz4");
        }
    }
}
