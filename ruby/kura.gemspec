# frozen_string_literal: true

# A gemspec for people who package the binding. The extension is built with cargo, not by
# RubyGems (Debian's RubyGems predates its Cargo builder): run `make ruby` at the repository
# root first, then `gem build kura.gemspec` here makes a platform gem holding
# lib/kura/kura_ext.so for this machine's Ruby and architecture.

require_relative "lib/kura/version"

Gem::Specification.new do |spec|
  spec.name = "kura"
  spec.version = Kura::VERSION
  spec.summary = "Kura embedded key-value databases (hash, B+ tree, in-memory) with a Hash-like API"
  spec.description = "Every Kura engine as a persistent Hash: db[k] = v, binary-safe Strings, " \
                     "ordered each(from:, to:, reversed:), atomic batches, one writer process per file."
  spec.authors = ["Kura contributors"]
  spec.license = "Apache-2.0"
  spec.required_ruby_version = ">= 3.0"
  spec.platform = Gem::Platform.local
  spec.files = Dir["lib/**/*.rb"] + ["lib/kura/kura_ext.so"]
  spec.require_paths = ["lib"]
end
