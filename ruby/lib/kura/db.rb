# frozen_string_literal: true

# The Ruby half of Kura::DB: a database that reads like a Hash (and like leveldb-ruby's
# LevelDB::DB), built on the native primitives of crates/kura-ruby/src/database.rs.
#
# Keys are Strings or Symbols, values Strings, stored as their bytes whatever their
# encoding; results are binary (ASCII-8BIT) Strings unless the database was opened with
# `encoding:`. Ordered engines (tree, baby) walk keys in order: `each(from:, to:,
# inclusive:, reversed:)` and `range`; a range runs from `from:` (included) up to `to:`
# (excluded unless `inclusive: true`), as in the CLI, Python and Rust (README, Conventions).

module Kura
  class DB
    include Enumerable

    # Walk codes of the native `_walk`.
    PAIRS = 0
    KEYS = 1
    VALUES = 2
    private_constant :PAIRS, :KEYS, :VALUES

    # Keyword arguments that are the binding's rather than the engine's.
    BINDING_OPTIONS = %i[encoding release_gvl].freeze

    # The native primitives (crates/kura-ruby/src/database.rs) behind the methods below.
    private_class_method :_open
    private :_delete, :_walk, :_increment, :_sync, :_rebuild, :_get_many

    # `Kura::DB.new(path, mode = "c", **params)`: see Kura.open. A block is refused, not
    # ignored (it would never run, and the handle would stay open): give it to `open`.
    def self.new(path, mode = "c", encoding: nil, release_gvl: nil, **params)
      raise ArgumentError, "Kura::DB.new takes no block; use Kura::DB.open or Kura.open" if block_given?

      path = File.path(path)
      encoding = Encoding.find(encoding.to_s) unless encoding.nil? || encoding.is_a?(Encoding)
      _open(path, mode.to_s, DB.param_pairs(params), encoding, release_gvl)
    end

    # Engine parameters as [name, text] pairs; values may be String, Symbol, Integer,
    # Float, true or false (the engine checks names and values).
    def self.param_pairs(params)
      params.map do |name, value|
        case value
        when String, Symbol, Integer, Float, true, false then [name.to_s, value.to_s]
        else raise TypeError, "Kura: parameter #{name} must be a String, Symbol, Integer, Float or boolean, " \
                              "not #{value.class}"
        end
      end
    end

    # `Kura::DB.open(path, mode = "c", **params) { |db| ... }`: Kura.open.
    def self.open(path, mode = "c", **options, &block)
      Kura.open(path, mode, **options, &block)
    end

    # Stores `value` under `key` (leveldb-ruby's `put`); `sync: true` also writes it to the
    # device before returning (`sync(hard: true)`).
    def put(key, value, sync: false)
      self[key] = value
      self.sync(hard: true) if sync
      value
    end

    alias get []
    alias store []=
    alias include? key?
    alias member? key?
    alias has_key? key?
    alias exists? key?
    alias includes? key? # leveldb-ruby's names
    alias contains? key?
    alias length size

    # Hash#count without arguments is the size; with an argument or a block, Enumerable's.
    def count(*args, &block)
      return size if args.empty? && block.nil?

      super
    end

    def empty?
      size.zero?
    end

    # Removes the record of `key` and returns its value; when there was none, returns nil,
    # or the block's value (`db.delete(k) { |key| ... }`), as Hash#delete does.
    # `sync: true` (leveldb-ruby's option) writes the removal to the device before returning.
    def delete(key, sync: false)
      old = _delete(key)
      self.sync(hard: true) if sync
      return old unless old.nil? && block_given?

      yield key
    end

    # The value of `key`; if absent, the default, the block's value, or KeyError.
    def fetch(key, *default)
      raise ArgumentError, "wrong number of arguments (given #{default.size + 1}, expected 1..2)" if default.size > 1

      value = self[key]
      return value unless value.nil?
      return yield(key) if block_given?
      return default.first unless default.empty?

      raise key_not_found(key)
    end

    # Yields `[key, value]` for every record (Hash#each style: `|k, v|` splats). On
    # ordered engines, the keys from `from:` (included) up to `to:` (excluded; included with
    # `inclusive: true`); `reversed: true` walks the same keys from the top down. A hash
    # engine raises Kura::NotOrderedError for any of them.
    def each(from: nil, to: nil, inclusive: false, reversed: false, &block)
      walk_or_enumerate(:each, PAIRS, from, to, inclusive, reversed, &block)
    end
    alias each_pair each

    # Ordered engines walk backwards through the engine; the others as Enumerable does.
    def reverse_each(&block)
      return super unless ordered?
      return enum_for(:reverse_each) { size } unless block

      each(reversed: true, &block)
    end

    # The keys of `each`'s walk, with the same keywords.
    def each_key(from: nil, to: nil, inclusive: false, reversed: false, &block)
      walk_or_enumerate(:each_key, KEYS, from, to, inclusive, reversed, &block)
    end

    # The values of `each`'s walk, with the same keywords.
    def each_value(from: nil, to: nil, inclusive: false, reversed: false, &block)
      walk_or_enumerate(:each_value, VALUES, from, to, inclusive, reversed, &block)
    end

    # Records whose keys lie in a Range (`"a".."c"` includes "c", `"a"..."c"` does not,
    # `"m"..`, `.."c"`), or from `from` (included) to `to` (excluded unless `inclusive:
    # true`), in key order (reversed: from the top down). Yields `[key, value]`, or returns
    # an Enumerator without a block. Ordered engines only.
    def range(from = nil, to = nil, inclusive: false, reversed: false, &block)
      if from.is_a?(Range)
        raise ArgumentError, "Kura: range takes a Range or from and to, not both" unless to.nil?

        lower, upper, upper_inclusive = from.begin, from.end, !from.exclude_end?
      else
        lower, upper, upper_inclusive = from, to, inclusive
      end
      return enum_for(:range, from, to, inclusive: inclusive, reversed: reversed) unless block

      _walk(PAIRS, lower, true, upper, upper_inclusive, reversed, &block)
      self
    end

    def keys
      each_key.to_a
    end

    def values
      each_value.to_a
    end

    def to_h(&block)
      return super if block

      each_with_object({}) { |(key, value), hash| hash[key] = value }
    end

    # The values of `keys`, nil where absent (Hash#values_at), looked up as one batch (the
    # GVL released from 16 keys on): the engine overlaps the batch's memory misses (hash
    # engines) or walks the tree once per leaf (docs/get_many.md). A key that is not a String
    # or Symbol raises TypeError before anything is looked up.
    def values_at(*keys)
      _get_many(keys)
    end

    # `values_at` for a collection of keys (an Array, a Set, any Enumerable), the name the
    # Python binding and the Rust API use. The keys are copied into an Array of this call's
    # own, which no other Ruby code can change while the native side reads it.
    def get_many(keys)
      raise TypeError, "Kura: get_many takes an Enumerable of keys, not #{keys.class}" unless keys.is_a?(Enumerable)

      _get_many(keys.to_a.dup)
    end

    # The values of `keys` (Hash#fetch_values): for a key with no record, the block's value
    # for it, or KeyError without a block. One batched lookup, as `values_at`.
    def fetch_values(*keys)
      _get_many(keys).each_with_index.map do |value, index|
        next value unless value.nil?

        key = keys[index]
        raise key_not_found(key) unless block_given?

        yield key
      end
    end

    # The given keys that have a record, as given, to their values (Hash#slice; memcached's
    # get_multi). One batched lookup, as `values_at`.
    def slice(*keys)
      keys.zip(_get_many(keys)).each_with_object({}) do |(key, value), found|
        found[key] = value unless value.nil?
      end
    end

    # Stores every pair of each Hash (or anything with each_pair) in turn; with a block, a key
    # that already has a record gets the block's value for `|key, old, new|`, as Hash#update.
    def update(*others)
      others.each do |other|
        other.each_pair do |key, value|
          if block_given?
            old = self[key]
            value = yield(key, old, value) unless old.nil?
          end
          self[key] = value
        end
      end
      self
    end
    alias merge! update

    # Whether some record has `value` (a walk over the values, as Hash#value?).
    def value?(value)
      each_value { |stored| return true if stored == value }
      false
    end
    alias has_value? value?

    # The key of the first record (in the walk's order) whose value is `value`, or nil.
    def key(value)
      each { |key, stored| return key if stored == value }
      nil
    end

    # Removes the records for which the block is true (Hash#delete_if); returns self.
    def delete_if(&block)
      return enum_for(:delete_if) { size } unless block

      remove_where(&block)
      self
    end

    # delete_if, returning nil when nothing was removed (Hash#reject!).
    def reject!(&block)
      return enum_for(:reject!) { size } unless block

      remove_where(&block).zero? ? nil : self
    end

    # Keeps only the records for which the block is true (Hash#keep_if); returns self.
    def keep_if
      return enum_for(:keep_if) { size } unless block_given?

      remove_where { |key, value| !yield(key, value) }
      self
    end

    # keep_if, returning nil when nothing was removed (Hash#select!, Hash#filter!).
    def select!
      return enum_for(:select!) { size } unless block_given?

      remove_where { |key, value| !yield(key, value) }.zero? ? nil : self
    end
    alias filter! select!

    # Every record as a Hash (implicit conversion: `hash.merge(db)`, `**db`).
    def to_hash
      to_h
    end

    # Adds `delta` to the counter under `key` (8 bytes, big-endian, as Tkrzw stores
    # counters) and returns the new value; an absent record starts at `initial`.
    def increment(key, delta = 1, initial: 0)
      _increment(key, delta, initial)
    end

    # Gathers puts and deletes and writes them when the block ends: atomically on the tree
    # engine, one by one on the others. An exception in the block writes nothing. Without
    # a block, returns a Kura::Batch for `db.write(batch)`. `sync: true` (leveldb-ruby's
    # option) also writes the batch to the device before returning.
    def batch(sync: false)
      batch = Batch.new
      return batch unless block_given?

      yield batch
      write(batch)
      self.sync(hard: true) if sync
      self
    end

    # Writes what is buffered to the file; with `hard: true` also to the device (fsync).
    def sync(hard: false)
      _sync(hard)
      self
    end

    # Rewrites the database compactly, applying engine parameters (`record_comp: "zstd"`).
    def rebuild(**params)
      _rebuild(DB.param_pairs(params))
      self
    end

    def inspect
      "#<#{self.class} #{path.inspect} engine=#{engine} mode=#{mode.inspect}#{closed? ? ' closed' : ''}>"
    end
    alias to_s inspect

    private

    # Deletes the records for which the block is true, as a walk meets them (a walk sees the
    # deletes of its own block, so each record is asked once); returns how many went.
    def remove_where
      removed = 0
      each do |key, value|
        next unless yield(key, value)

        delete(key)
        removed += 1
      end
      removed
    end

    # `from` is always the lower bound and `to` the upper, whichever way the walk goes.
    def walk(what, from, to, inclusive, reversed, &block)
      _walk(what, from, true, to, inclusive, reversed, &block)
    end

    # `each`, `each_key` and `each_value` (named `method`): the walk of `what` with a block,
    # self returned; without one, an Enumerator of the same call, sized unless bounded.
    def walk_or_enumerate(method, what, from, to, inclusive, reversed, &block)
      unless block
        return enum_for(method, from: from, to: to, inclusive: inclusive, reversed: reversed) do
          size_unless_bounded(from, to)
        end
      end

      walk(what, from, to, inclusive, reversed, &block)
      self
    end

    def size_unless_bounded(from, to)
      from.nil? && to.nil? ? size : nil
    end

    # The KeyError Hash#fetch raises for `key`.
    def key_not_found(key)
      KeyError.new("key not found: #{key.inspect}", receiver: self, key: key)
    end
  end
end
