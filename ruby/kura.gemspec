# frozen_string_literal: true

# The gemspec of both gems, built from a staging copy by ruby/gem.sh (`make gem`):
#   KURA_GEM=source    kura-VERSION.gem: lib/ and ext/kura/ (extconf.rb plus the crates);
#                      `gem install` compiles the extension with cargo (rb-sys underneath)
#   KURA_GEM=platform  kura-VERSION-PLATFORM.gem: lib/ with the extension `make ruby` built
#                      for this machine's Ruby and architecture (the default)

require_relative "lib/kura/version"

Gem::Specification.new do |spec|
  spec.name = "kura"
  spec.version = Kura::VERSION
  spec.summary = "Kura embedded key-value databases (hash, B+ tree, in-memory) with a Hash-like API"
  spec.description = "Every Kura engine as a persistent Hash: db[k] = v, binary-safe Strings, " \
                     "ordered each(from:, to:, inclusive:, reversed:), atomic batches, one writer " \
                     "process per file. The engines are written in Rust."
  spec.authors = ["Kura contributors"]
  spec.license = "Apache-2.0"
  spec.required_ruby_version = ">= 3.0"
  spec.require_paths = ["lib"]
  docs = %w[README.md LICENSE CHANGELOG.md].select { |file| File.exist?(File.join(__dir__, file)) }
  spec.extra_rdoc_files = docs
  ruby_files = Dir.chdir(__dir__) { Dir["lib/**/*.rb"] }
  if ENV["KURA_GEM"] == "source"
    # A Rust toolchain (cargo), pkg-config and liblz4 are needed where it installs.
    spec.extensions = ["ext/kura/extconf.rb"]
    spec.files = ruby_files + docs + Dir.chdir(__dir__) { Dir["ext/kura/**/*"].select { |f| File.file?(f) } }
    spec.requirements << "Rust's cargo (rustup), pkg-config and liblz4 (liblz4-dev) to build the extension"
  else
    spec.platform = Gem::Platform.local
    spec.files = ruby_files + docs + ["lib/kura/kura_ext.so"]
  end
end
