# frozen_string_literal: true

# Kura for Ruby: `require "kura"`, then `Kura.open("words.kut") { |db| db["k"] = "v" }`.
#
# The native extension (kura/kura_ext.so, built from crates/kura-ruby by `make ruby`)
# defines Kura::DB's primitives, Kura::Batch and the Kura::Error classes; the files under
# kura/ add the Ruby half of the Hash-like API. See docs/ruby.md.

require_relative "kura/version"
require_relative "kura/kura_ext"
require_relative "kura/db"
require_relative "kura/batch"

module Kura
  private_class_method :_sized_params, :_check

  # Opens (or creates) a database; the engine comes from the extension (.kuh hash, .kut
  # tree, ...: each engine's :extension in Kura.engines, from the library's registry) or
  # from `engine:`. `mode` is "r" (read
  # only), "w" (read-write, must exist), "c" (create if missing, the default) or "n" (new,
  # empty). Other keywords: engine parameters (`record_comp: "zstd"`, `num_buckets: 1_000_000`,
  # ...), `encoding:` for the encoding of returned Strings (default binary, ASCII-8BIT) and
  # `release_gvl:` (true: release the GVL in every record call; default: only for
  # compressed records). With a block, yields the database, closes it when the block ends
  # and returns the block's value, like File.open.
  def self.open(path, mode = "c", **options)
    db = DB.new(path, mode, **options)
    return db unless block_given?

    begin
      yield db
    ensure
      db.close
    end
  end

  # Reads every record (and page) of the database at `path` and verifies what its engine
  # can (`kura check`): a Hash with :clean, :records, :pages, :problems and :first_problems
  # (up to 20 Strings). Damage that stops the open is a problem too; keywords are engine
  # parameters.
  def self.check(path, **params)
    _check(path.to_s, DB.param_pairs(params))
  end

  # The engine registry: one Hash per engine (:name, :class, :extension, :storage,
  # :ordered, :order ("as shards" for a shard set, ordered as its shards), :params,
  # :codec_param, :sized_by, :magic ([offset, bytes] pairs), :shard_set, :restore,
  # :after_power_loss ("commit prefix", "each record", "last snapshot" or "as shards"), :summary).
  def self.engines
    ENGINES
  end

  # The parameters a new database of `engine` sized for `records` records gets where the
  # caller gives none (the hash engine's bucket count, the cache engine's record cap), from
  # the registry: for tests, benchmarks and demos that run every engine.
  def self.sized_params(engine, records)
    _sized_params(engine.to_s, records).to_h { |name, value| [name.to_sym, value] }
  end
end
