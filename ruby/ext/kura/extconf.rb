# frozen_string_literal: true

# Builds the native extension when the source gem is installed (`gem install
# kura-VERSION.gem`): cargo compiles crates/kura-ruby (magnus + rb-sys, which finds this
# Ruby's headers through RbConfig) and the library it wraps, from the crates the gem carries
# beside this file. RubyGems then runs `make` and `make install` on the Makefile written
# here. Debian's RubyGems predates the Cargo builder of RubyGems 3.4, and the rb_sys gem's
# mkmf helper comes from rubygems.org, so the Makefile is written by hand: it needs only
# cargo (rustup) and, for the lz4 codec, liblz4-dev and pkg-config.

require "rbconfig"

here = __dir__
cargo = ENV.fetch("CARGO", "cargo")
cargo_home_bin = File.join(Dir.home, ".cargo", "bin")
unless system("#{cargo} --version", out: File::NULL, err: File::NULL) ||
       File.executable?(File.join(cargo_home_bin, "cargo"))
  abort "kura: building the extension needs Rust's cargo (https://rustup.rs) on the PATH"
end

# The extension's file name on this platform (kura_ext.so on Linux, .bundle on macOS).
dlext = RbConfig::CONFIG["DLEXT"]
library = RbConfig::CONFIG["host_os"].include?("darwin") ? "libkura_ext.dylib" : "libkura_ext.so"
# A target directory of its own inside the build tree unless CARGO_TARGET_DIR names one (a
# shared one lets a second install reuse the compiled dependencies).
target = ENV.fetch("CARGO_TARGET_DIR", File.join(here, "target"))

File.write("Makefile", <<~MAKE)
  # Written by extconf.rb: builds kura_ext.#{dlext} with cargo.
  SHELL = /bin/sh
  export PATH := #{cargo_home_bin}:$(PATH)
  export RUBY := #{RbConfig.ruby}
  sitearchdir ?= #{RbConfig::CONFIG['sitearchdir']}
  sitelibdir ?= #{RbConfig::CONFIG['sitelibdir']}

  all: kura_ext.#{dlext}

  kura_ext.#{dlext}:
  \tCARGO_TARGET_DIR="#{target}" #{cargo} build --release --manifest-path "#{here}/Cargo.toml" -p kura-ruby
  \tcp "#{target}/release/#{library}" kura_ext.#{dlext}

  install: kura_ext.#{dlext}
  \tmkdir -p "$(DESTDIR)$(sitearchdir)/kura"
  \tcp kura_ext.#{dlext} "$(DESTDIR)$(sitearchdir)/kura/kura_ext.#{dlext}"

  clean:
  \trm -f kura_ext.#{dlext}

  .PHONY: all install clean
MAKE
