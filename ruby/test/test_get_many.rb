# frozen_string_literal: true

# Batched reads (`values_at`, `get_many`, `fetch_values`, `slice`, one `_get_many` lookup
# each) against a Ruby Hash: random batches with repeated, missing and Symbol keys, empty
# and large batches, between random writes, on every engine; bad keys are a TypeError
# before anything is looked up; and a batch that runs while another thread writes sees, for
# each key, a value the key held at some moment during the call. A failure names the seed;
# set KURA_TEST_SEED to replay one.

require "test_helper"
require "set"

class GetManyTest < Minitest::Test
  include KuraTest::TempDir
  extend KuraTest::PerEngine

  SEED = Integer(ENV.fetch("KURA_TEST_SEED", Random.new_seed % 1_000_000))
  ROUNDS = 200

  def random_key(rng)
    "k#{rng.rand(60)}".b
  end

  # Hash#fetch_values and Hash#slice over `model` for the keys as given (`given[i]` is
  # `keys[i]`, or its Symbol): a missing key's value names the key given.
  def fetched(model, keys, given)
    keys.each_with_index.map { |key, i| model.fetch(key) { "missing #{given[i]}" } }
  end

  def sliced(model, keys, given)
    keys.each_with_index.with_object({}) { |(key, i), found| found[given[i]] = model[key] if model.key?(key) }
  end

  for_each_configuration("batches_match_a_hash") do |engine, options|
    rng = Random.new(SEED)
    context = "seed #{SEED} (KURA_TEST_SEED=#{SEED} to replay)"
    model = {}
    Kura.open(db_path(engine), "n", **options) do |db|
      ROUNDS.times do |round|
        rng.rand(8).times do
          key = random_key(rng)
          if rng.rand(4).zero?
            db.delete(key)
            model.delete(key)
          else
            value = Array.new(rng.rand(0..20)) { rng.rand(256) }.pack("C*")
            db[key] = value
            model[key] = value
          end
        end
        keys = Array.new(rng.rand(0..40)) { random_key(rng) }
        keys += keys.sample(rng.rand(0..3), random: rng)
        symbols = keys.map { |key| rng.rand(5).zero? ? key.to_sym : key }
        step = "#{context}, round #{round}"
        assert_equal model.values_at(*keys), db.values_at(*symbols), step
        assert_equal model.values_at(*keys), db.get_many(symbols.each), step
        assert_equal fetched(model, keys, symbols), db.fetch_values(*symbols) { |key| "missing #{key}" }, step
        assert_equal sliced(model, keys, symbols), db.slice(*symbols), step
        assert_equal model.slice(*keys), db.slice(*keys), step
      end
    end
  end

  for_each_configuration("a_large_batch_and_an_empty_one") do |engine, options|
    count = KuraTest::CAPACITY
    Kura.open(db_path(engine), "n", **options) do |db|
      (0...count).step(2) { |i| db["key#{i}"] = "value#{i}" }
      keys = (0...count).map { |i| "key#{(i * 7919) % count}" }
      expected = keys.map { |key| key.delete_prefix("key").to_i.even? ? key.sub("key", "value") : nil }
      assert_equal expected, db.values_at(*keys)
      assert_equal [], db.values_at
      assert_equal [], db.get_many([])
      assert_equal({}, db.slice)
    end
  end

  for_each_configuration("bad_keys_and_collections_raise_type_error") do |engine, options|
    Kura.open(db_path(engine), "n", **options) do |db|
      db["a"] = "1"
      [1, nil, ["a"], 2.5].each do |bad|
        assert_raises(TypeError) { db.values_at("a", bad) }
        assert_raises(TypeError) { db.get_many(["a", bad]) }
      end
      ["a", :a, nil, 1].each { |not_a_collection| assert_raises(TypeError) { db.get_many(not_a_collection) } }
      assert_equal ["1", nil], db.get_many(Set["a", "b"])
      error = assert_raises(KeyError) { db.fetch_values("a", :b) }
      assert_equal :b, error.key
      assert_same db, error.receiver
      assert_equal ["1"], db.values_at(:a)
      refute_respond_to db, :_get_many
    end
  end

  def test_results_take_the_database_encoding
    engine = Kura.engines.find { |e| e[:name] == "tree" }
    Kura.open(db_path(engine), "n", encoding: "UTF-8") do |db|
      db["k"] = "caf\u00e9"
      assert_equal [Encoding::UTF_8], db.values_at("k").map(&:encoding)
      assert_equal "caf\u00e9", db.slice("k")["k"]
    end
  end

  def test_a_closed_database_raises
    engine = Kura.engines.find { |e| e[:name] == "hash" }
    db = Kura.open(db_path(engine), "n")
    db.close
    assert_raises(Kura::ClosedError) { db.values_at("a") }
  end

  # A writer thread counts every key up while batches run: each value a batch returns lies
  # between the key's value before the call and its value after it, and is one the writer
  # wrote. (This checks what a batch may return while writes go on, not that the writer ran
  # during a batch: with the GVL released for each batch it can, but nothing here waits
  # for it to.)
  for_each_configuration("a_batch_sees_values_its_keys_held_during_the_call") do |engine, options|
    keys = (0...64).map { |i| "key#{i}" }
    value = ->(n) { format("%08d", n) }
    Kura.open(db_path(engine), "n", release_gvl: true, **options) do |db|
      keys.each { |key| db[key] = value.call(0) }
      done = false
      writer = Thread.new do
        n = 0
        until done
          n += 1
          keys.each { |key| db[key] = value.call(n) }
        end
      end
      begin
        50.times do
          before = keys.map { |key| db[key].to_i }
          seen = db.values_at(*keys)
          after = keys.map { |key| db[key].to_i }
          seen.each_with_index do |got, i|
            assert_match(/\A\d{8}\z/, got)
            assert_includes before[i]..after[i], got.to_i, "key #{keys[i]}"
          end
        end
      ensure
        done = true
        writer.join
      end
    end
  end
end
