# frozen_string_literal: true

# Keys and values are bytes: every byte value, empty Strings, NULs, Strings of any encoding
# stored as their bytes; results are ASCII-8BIT unless the database has an `encoding:`.

require "test_helper"

class BinaryTest < Minitest::Test
  include KuraTest::TempDir
  extend KuraTest::PerEngine

  for_each_configuration("every_byte_value_and_empty_strings_round_trip") do |engine, options|
    path = db_path(engine)
    all_bytes = (0..255).map(&:chr).map(&:b)
    Kura.open(path, "n", **options) do |db|
      all_bytes.each { |byte| db[byte] = byte * 3 }
      db[""] = "empty key"
      db["empty value"] = ""
      db["nul\x00inside".b] = "a\x00b".b
    end
    Kura.open(path, "r", **options) do |db|
      all_bytes.each do |byte|
        value = db[byte]
        assert_equal byte * 3, value
        assert_equal Encoding::ASCII_8BIT, value.encoding
      end
      assert_equal "empty key", db[""]
      assert_equal "", db["empty value"]
      assert db.key?("empty value")
      assert_equal "a\x00b".b, db["nul\x00inside".b]
      assert_equal 259, db.size
      db.each { |key, value| assert_equal [Encoding::ASCII_8BIT] * 2, [key.encoding, value.encoding] }
      every_key = (all_bytes + ["".b, "empty value".b, "nul\x00inside".b]).sort
      engine[:ordered] ? assert_equal(every_key, db.keys) : assert_equal(every_key, db.keys.sort)
    end
  end

  for_each_configuration("encodings") do |engine, options|
    path = db_path(engine)
    Kura.open(path, "n", **options) do |db|
      db["clé"] = "café"
      db[:symbol] = "from a symbol"
      db["utf16".encode("UTF-16LE")] = "ü".encode("UTF-16LE")
      assert_equal "café".b, db["clé"]
      assert_equal "from a symbol", db["symbol"]
      assert_equal "from a symbol", db[:symbol]
      db["\xFF\x00".b.to_sym] = "binary symbol" # a Symbol's bytes, whatever its encoding
      assert_equal "binary symbol", db["\xFF\x00".b]
      assert_equal "ü".encode("UTF-16LE").b, db["utf16".encode("UTF-16LE").b]
      assert_nil db.encoding
    end
    Kura.open(path, "w", encoding: "UTF-8", **options) do |db|
      assert_equal Encoding::UTF_8, db.encoding
      value = db["clé"]
      assert_equal Encoding::UTF_8, value.encoding
      assert_equal "café", value
      db.each { |key, item| assert_equal [Encoding::UTF_8] * 2, [key.encoding, item.encoding] }
      assert_includes db.keys, "clé"
    end
    Kura.open(path, "r", encoding: Encoding::ISO_8859_1, **options) do |db|
      assert_equal Encoding::ISO_8859_1, db["clé"].encoding
      assert_equal "café".b, db["clé"].b
    end
  end
end
