# frozen_string_literal: true

# Ordered engines (those the registry marks ordered): each(from:, to:, reversed:), range and
# each_key/each_value against a sorted Array of the same records, with random bounds that
# are present keys, absent keys, or none; and hash engines refusing key order.

require "test_helper"

class OrderedTest < Minitest::Test
  include KuraTest::TempDir
  extend KuraTest::PerEngine

  SEED = Integer(ENV.fetch("KURA_TEST_SEED", Random.new_seed % 1_000_000))
  RECORDS = 600 # more than a walk's chunk (256), so walks cross chunk boundaries

  def random_key(rng)
    Array.new(rng.rand(0..4)) { rng.rand(256) }.pack("C*")
  end

  # The sorted pairs whose keys lie between lower and upper (nil: open), as `each` yields.
  # The model of a walk: keys from `from` (included) up to `to` (excluded unless
  # `inclusive`), the same keys top down when reversed.
  def expected(sorted, from, to, reversed, inclusive = false)
    inside = sorted.select do |key, _|
      (from.nil? || key >= from) && (to.nil? || key < to || (inclusive && key == to))
    end
    reversed ? inside.reverse : inside
  end

  for_each_configuration("walks_match_sorted_arrays", only_ordered: true) do |engine, options|
    rng = Random.new(SEED)
    context = "seed #{SEED} (KURA_TEST_SEED=#{SEED} to replay)"
    Kura.open(db_path(engine), "n", **options) do |db|
      model = {}
      RECORDS.times do
        key = random_key(rng)
        model[key] = "v#{key.bytes.join('.')}".b
        db[key] = model[key]
      end
      sorted = model.sort
      assert_equal sorted, db.to_a, context
      assert_equal sorted.reverse, db.each(reversed: true).to_a, context
      assert_equal sorted.reverse, db.reverse_each.to_a, context
      30.times do
        from, to = Array.new(2) { rng.rand(3).zero? ? nil : [random_key(rng), sorted.sample(random: rng)[0]].sample(random: rng) }
        reversed = rng.rand(2).zero?
        inclusive = rng.rand(2).zero?
        want = expected(sorted, from, to, reversed, inclusive)
        label = "#{context}, from #{from.inspect} to #{to.inspect} reversed #{reversed} inclusive #{inclusive}"
        walk = { from: from, to: to, inclusive: inclusive, reversed: reversed }
        assert_equal want, db.each(**walk).to_a, label
        assert_equal want.map(&:first), db.each_key(**walk).to_a, label
        assert_equal want.map(&:last), db.each_value(**walk).to_a, label

        lower, upper = [from, to].map { |k| k || "".b }.sort
        in_range = sorted.select { |key, _| key >= lower && key < upper }
        assert_equal in_range, db.range(lower...upper).to_a, label
        assert_equal in_range.reverse, db.range(lower...upper, reversed: true).to_a, label
        assert_equal sorted.select { |key, _| key >= lower }, db.range(lower..).to_a, label
        assert_equal sorted.select { |key, _| key <= upper }, db.range(..upper).to_a, label
        assert_equal expected(sorted, lower, upper, false), db.range(lower, upper).to_a, label
        assert_equal expected(sorted, lower, upper, false, true), db.range(lower, upper, inclusive: true).to_a, label
      end
    end
  end

  for_each_configuration("walk_sees_writes_made_by_its_block", only_ordered: true) do |engine, options|
    Kura.open(db_path(engine), "n", **options) do |db|
      300.times { |i| db[format("%04d", i)] = "x" }
      seen = []
      db.each_key do |key|
        seen << key
        db.delete(key)
        db["#{key}+"] = "y" if key.end_with?("0") && !key.include?("+")
      end
      assert_equal seen.uniq, seen
      assert_empty db.keys.reject { |key| key.end_with?("+") }
    end
  end

  def test_hash_engines_refuse_key_order
    Kura.engines.reject { |engine| engine[:ordered] }.each do |engine|
      Kura.open(db_path(engine), "n", **Kura.sized_params(engine[:name], 100)) do |db|
        db["a"] = "1"
        assert_raises(Kura::NotOrderedError) { db.each(from: "a") { nil } }
        assert_raises(Kura::NotOrderedError) { db.each(reversed: true).to_a }
        assert_raises(Kura::NotOrderedError) { db.range("a".."b").to_a }
        assert_kind_of Kura::InfeasibleError, (db.each_key(to: "b").first rescue $!)
        assert_equal [%w[a 1]], db.to_a
      end
    end
  end
end
