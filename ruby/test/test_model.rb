# frozen_string_literal: true

# Kura::DB against a Ruby Hash: random operation sequences on every engine, each result
# compared with what the Hash says, with the database closed and reopened midway (the file
# engines from their file, the memory engines from their snapshot). A failure names the
# seed; set KURA_TEST_SEED to replay one.

require "test_helper"

class ModelTest < Minitest::Test
  include KuraTest::TempDir
  include KuraTest::Assertions
  extend KuraTest::PerEngine

  OPERATIONS = 1500
  SEED = Integer(ENV.fetch("KURA_TEST_SEED", Random.new_seed % 1_000_000))

  # Short keys from a small alphabet (so operations collide), binary bytes and "" included.
  def random_key(rng)
    Array.new(rng.rand(0..3)) { ["a", "b", "\x00", "\xFF", "z"].sample(random: rng) }.join.b
  end

  def random_value(rng)
    Array.new(rng.rand(0..12)) { rng.rand(256) }.pack("C*")
  end

  def check_whole(db, model, engine, context)
    assert_equal model.size, db.size, context
    assert_equal model, db.to_h, context
    assert_equal model.keys.sort, db.keys, context if engine[:ordered]
    assert_equal model.keys.sort, db.keys.sort, context
  end

  for_each_configuration("matches_a_hash") do |engine, options|
    rng = Random.new(SEED)
    context = "seed #{SEED} (KURA_TEST_SEED=#{SEED} to replay)"
    path = db_path(engine)
    model = {}
    db = Kura.open(path, "n", **options)
    OPERATIONS.times do |step|
      key = random_key(rng)
      case rng.rand(12)
      when 0..3
        value = random_value(rng)
        assert_same value, (db[key] = value), context
        model[key] = value
      when 4, 5
        assert_result model[key], db[key], context
      when 6
        assert_result model.delete(key), db.delete(key), context
      when 7
        assert_equal model.key?(key), db.key?(key), context
        assert_equal model.fetch(key, :absent), db.fetch(key, :absent), context
      when 8
        expected, desired = [model[key], random_value(rng)].shuffle(random: rng)
        expected = model[key] if rng.rand(2).zero?
        desired = nil if rng.rand(4).zero?
        matched = model[key] == expected
        assert_equal matched, db.compare_exchange(key, expected, desired), context
        if matched
          desired.nil? ? model.delete(key) : model[key] = desired
        end
      when 9
        ops = Array.new(rng.rand(1..5)) { [random_key(rng), rng.rand(3).zero? ? nil : random_value(rng)] }
        db.batch { |b| ops.each { |k, v| v.nil? ? b.delete(k) : b.put(k, v) } }
        ops.each { |k, v| v.nil? ? model.delete(k) : model[k] = v }
      when 10
        counter = "counter#{rng.rand(2)}".b
        delta = rng.rand(-5..5)
        current = model.key?(counter) ? model[counter].unpack1("q>") : 0
        assert_equal current + delta, db.increment(counter, delta), context
        model[counter] = [current + delta].pack("q>")
      when 11
        check_whole(db, model, engine, "#{context}, step #{step}")
      end
      next unless step == OPERATIONS / 2

      db.close
      db = Kura.open(path, "w", **options)
      check_whole(db, model, engine, "#{context}, after reopening")
    end
    check_whole(db, model, engine, context)
    db.clear
    assert_empty db
    db.close
  end

  for_each_configuration("hash_like_helpers") do |engine, options|
    Kura.open(db_path(engine), "n", **options) do |db|
      assert_empty db
      db.update("a" => "1", b: "2")
      db.store("c", "3")
      db.put("d", "4")
      assert_equal "2", db.get("b")
      assert_equal 4, db.length
      assert_equal 4, db.count
      assert_equal 1, db.count { |key, _| key == "a" }
      assert_equal ["1", nil], db.values_at("a", "zz")
      assert_equal %w[1 2 3 4], db.values.sort
      assert_equal %w[a b c d], db.each_key.sort
      assert_equal [%w[a 1]], db.select { |key, _| key == "a" }
      assert_equal({ "a" => "A" }, db.to_h { |key, value| [key, value.tr("1", "A")] }.slice("a"))
      assert_equal "nope", db.fetch("zz") { |key| "no#{key.slice(0, 0)}pe" }
      assert_equal "zz!", db.delete("zz") { |key| "#{key}!" }
      assert db.member?("a") && db.include?(:a) && db.has_key?("a") && db.exists?("a")
      assert db.includes?("a") && db.contains?("a")
      assert_equal db.to_a.reverse, db.reverse_each.to_a
      assert_equal 4, db.each.size
      assert_equal db, db.each { |_| nil }
      # leveldb-ruby's sync: option writes through to the device; the records are the same.
      assert_equal "5", db.put("e", "5", sync: true)
      assert_equal "5", db.delete("e", sync: true)
      assert_equal db, db.batch(sync: true) { |b| b.put("f", "6") }
      assert_equal "6", db["f"]
      assert_nil db.delete("zz", sync: true)
    end
  end

  # The Hash methods that search or filter by value, and update with a block, each on a
  # Ruby Hash holding the same records: the same answers, the same records left.
  for_each_configuration("filters_and_updates_match_a_hash") do |engine, options|
    rng = Random.new(SEED)
    context = "seed #{SEED} (KURA_TEST_SEED=#{SEED} to replay)"
    Kura.open(db_path(engine), "n", **options) do |db|
      model = {}
      20.times do |round|
        label = "#{context}, round #{round}"
        additions = Array.new(rng.rand(0..30)) { [random_key(rng), random_value(rng)] }.to_h
        extra = Array.new(rng.rand(0..5)) { [random_key(rng), random_value(rng)] }.to_h
        merge = ->(_key, old, new) { old + new }
        assert_same db, db.update(additions, extra, &merge), label
        model.update(additions, extra, &merge)
        assert_equal model, db.to_hash, label
        probe = rng.rand(2).zero? ? model.values.sample(random: rng) : random_value(rng)
        assert_equal model.value?(probe), db.value?(probe), label
        assert_equal model.value?(probe), db.has_value?(probe), label
        assert_equal model.key?(db.key(probe)), model.value?(probe), label
        assert_equal probe, model[db.key(probe)], label if model.value?(probe)
        cut = rng.rand(256)
        case rng.rand(4)
        when 0
          assert_same db, db.delete_if { |_, value| value.bytesize.odd? }, label
          model.delete_if { |_, value| value.bytesize.odd? }
        when 1
          assert_result model.dup.reject! { |key, _| key.bytes.sum > cut } && db,
                        db.reject! { |key, _| key.bytes.sum > cut }, label
          model.reject! { |key, _| key.bytes.sum > cut }
        when 2
          assert_same db, db.keep_if { |key, _| key.bytesize < 2 }, label
          model.keep_if { |key, _| key.bytesize < 2 }
        when 3
          assert_result model.dup.select! { |_, value| value.bytesize > 3 } && db,
                        db.filter! { |_, value| value.bytesize > 3 }, label
          model.select! { |_, value| value.bytesize > 3 }
        end
        assert_equal model, db.to_h, label
      end
      assert_equal({ "x".b => "1".b }.merge(model), { "x".b => "1".b }.merge(db), context)
    end
  end

  for_each_configuration("maintenance_keeps_the_records") do |engine, options|
    Kura.open(db_path(engine), "n", **options) do |db|
      model = (0...300).to_h { |i| ["key#{i}".b, ("value#{i}" * (i % 7)).b] }
      db.update(model)
      (0...300).step(3) { |i| model.delete(db.delete("key#{i}") && "key#{i}".b) }
      db.sync
      db.sync(hard: true)
      stats = db.stats
      assert_equal engine[:class], stats[:class]
      assert_equal model.size, stats[:count]
      assert_equal true, stats[:healthy]
      assert_operator db.file_size, :>, 0
      assert_equal db, db.rebuild
      assert_equal model, db.to_h
      assert_equal engine[:name], db.engine
      assert_equal engine[:ordered], db.ordered?
      assert_predicate db, :writable?
      assert_equal "n", db.mode
      assert_match(/engine=#{engine[:name]}/, db.inspect)
    end
  end

  def test_versions_agree
    assert_equal Kura::NATIVE_VERSION, Kura::VERSION
  end

  def test_open_with_a_block_closes_and_returns_the_block_value
    path = File.join(@dir, "block.kuh")
    kept = nil
    assert_equal 42, Kura.open(path) { |db| kept = db; 42 }
    assert_predicate kept, :closed?
    assert_raises(RuntimeError) { Kura.open(path) { |db| kept = db; raise "boom" } }
    assert_predicate kept, :closed?
    db = Kura::DB.new(path, engine: "hash")
    assert_equal "hash", db.engine
    refute_predicate db, :closed?
    db.close
    # Kura::DB.open is Kura.open; Kura::DB.new refuses a block, which it could only drop.
    assert_equal 7, Kura::DB.open(path, "w") { |db2| kept = db2; 7 }
    assert_predicate kept, :closed?
    assert_raises(ArgumentError) { Kura::DB.new(path) { |_| flunk "the block of new ran" } }
  end
end
