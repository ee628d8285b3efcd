# frozen_string_literal: true

# The library's version, read by kura.gemspec too; a test checks it against the extension's
# (the workspace version in Cargo.toml), so the two cannot drift apart.

module Kura
  VERSION = "0.1.0"
end
