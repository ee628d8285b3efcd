# frozen_string_literal: true

# Errors: each kura::ErrorKind as its Kura::Error subclass, KeyError and TypeError where a
# Hash raises them, and a database left usable after each.

require "test_helper"
require "rbconfig"

class ErrorsTest < Minitest::Test
  include KuraTest::TempDir
  extend KuraTest::PerEngine

  LIB = File.expand_path("../lib", __dir__)

  def file_engines
    Kura.engines.select { |engine| engine[:storage] == "file" }
  end

  def test_the_hierarchy
    %i[NotFoundError DuplicateError InvalidArgumentError BrokenDataError LockedError FileError
       InfeasibleError LimitError InternalError].each { |name| assert_operator Kura.const_get(name), :<, Kura::Error }
    assert_operator Kura::Error, :<, StandardError
    assert_operator Kura::FileMissingError, :<, Kura::NotFoundError
    assert_operator Kura::ClosedError, :<, Kura::InfeasibleError
    assert_operator Kura::NotOrderedError, :<, Kura::InfeasibleError
    # The extension keeps the classes it raises: they must survive objects moving.
    GC.compact
    assert_raises(Kura::FileMissingError) { Kura.open(File.join(@dir, "absent.kut"), "r") }
  end

  def test_missing_file_with_r_or_w
    Kura.engines.each do |engine|
      path = db_path(engine, "missing")
      %w[r w].each do |mode|
        error = assert_raises(Kura::FileMissingError) { Kura.open(path, mode, **Kura.sized_params(engine[:name], 10)) }
        assert_includes error.message, "missing"
      end
      refute File.exist?(path)
    end
  end

  def test_bad_mode_parameters_and_engine
    path = File.join(@dir, "db.kut")
    assert_raises(Kura::InvalidArgumentError) { Kura.open(path, "x") }
    assert_raises(Kura::InvalidArgumentError) { Kura.open(path, "c", no_such_param: 1) }
    assert_raises(Kura::InvalidArgumentError) { Kura.open(path, "c", record_comp: "nope") }
    assert_raises(Kura::InvalidArgumentError) { Kura.open(File.join(@dir, "db.txt")) }
    assert_raises(Kura::InvalidArgumentError) { Kura.open(path, engine: "nope") }
    assert_raises(TypeError) { Kura.open(path, "c", max_page_size: [1]) }
    assert_raises(ArgumentError) { Kura.open(path, "c", encoding: "no-such-encoding") }
    Kura.open(path, "c", max_page_size: 4096) { |db| db["still"] = "opens" }
  end

  for_each_configuration("wrong_types") do |engine, options|
    Kura.open(db_path(engine), "n", **options) do |db|
      [1, nil, 1.5, [], {}, Object.new].each do |bad|
        assert_raises(TypeError) { db[bad] }
        assert_raises(TypeError) { db[bad] = "v" }
        assert_raises(TypeError) { db.delete(bad) }
        assert_raises(TypeError) { db.key?(bad) }
        assert_raises(TypeError) { db.batch { |b| b.put(bad, "v") } }
      end
      [1, nil, :sym, []].each do |bad|
        assert_raises(TypeError) { db["k"] = bad }
        assert_raises(TypeError) { db.batch { |b| b.put("k", bad) } }
      end
      assert_raises(TypeError) { db.increment("k", "1") }
      assert_empty db
    end
  end

  for_each_configuration("fetch_raises_key_error") do |engine, options|
    Kura.open(db_path(engine), "n", **options) do |db|
      error = assert_raises(KeyError) { db.fetch("absent") }
      assert_equal "absent", error.key
      assert_same db, error.receiver
      assert_raises(ArgumentError) { db.fetch("absent", 1, 2) }
    end
  end

  for_each_configuration("use_after_close") do |engine, options|
    db = Kura.open(db_path(engine), "n", **options)
    db["k"] = "v"
    db.close
    assert_predicate db, :closed?
    db.close # twice is harmless
    calls = [-> { db["k"] }, -> { db["k"] = "v" }, -> { db.delete("k") }, -> { db.size }, -> { db.key?("k") },
             -> { db.each { nil } }, -> { db.keys }, -> { db.to_h }, -> { db.batch { |b| b.put("a", "b") } },
             -> { db.increment("n") }, -> { db.sync }, -> { db.stats }, -> { db.clear }, -> { db.fetch("k") }]
    calls.each { |call| assert_raises(Kura::ClosedError) { call.call } }
    assert_match(/closed/, db.inspect)
  end

  def test_read_only_refuses_writes
    file_engines.each do |engine|
      path = db_path(engine)
      Kura.open(path, "n") { |db| db["k"] = "v" }
      Kura.open(path, "r") do |db|
        refute_predicate db, :writable?
        assert_raises(Kura::InfeasibleError) { db["k"] = "w" }
        assert_raises(Kura::InfeasibleError) { db.delete("k") }
        assert_equal "v", db["k"]
      end
    end
  end

  # Another process holds the database: a writer locks out everyone, readers share.
  def test_locked_by_another_process
    file_engines.each do |engine|
      path = db_path(engine)
      Kura.open(path, "n") { |db| db["k"] = "v" }
      %w[w r].each do |holder_mode|
        holder = "require 'kura'; db = Kura.open(ARGV[0], ARGV[1]); puts 'open'; $stdout.flush; $stdin.read; db.close"
        IO.popen([RbConfig.ruby, "-I", LIB, "-e", holder, path, holder_mode], "r+") do |io|
          assert_equal "open\n", io.gets
          assert_raises(Kura::LockedError) { Kura.open(path, "w") }
          if holder_mode == "r"
            Kura.open(path, "r") { |db| assert_equal "v", db["k"] }
          else
            assert_raises(Kura::LockedError) { Kura.open(path, "r") }
          end
          io.close_write
        end
        assert_predicate $?, :success?
        Kura.open(path, "w") { |db| assert_equal "v", db["k"] }
      end
    end
  end

  def test_corrupted_and_truncated_files
    Kura.engines.each do |engine|
      path = db_path(engine, "broken")
      File.binwrite(path, "this is not a database, just some text " * 200)
      assert_raises(Kura::BrokenDataError) { Kura.open(path, "r", **Kura.sized_params(engine[:name], 10)) }
    end
    file_engines.each do |engine|
      path = db_path(engine, "truncated")
      Kura.open(path, "n") { |db| 100.times { |i| db["key#{i}"] = "value#{i}" * 10 } }
      # A shard set has no file of its own: truncate its first shard's.
      file = File.exist?(path) ? path : Dir.glob("#{path}-00000-of-*").first
      File.truncate(file, 20)
      assert_raises(Kura::BrokenDataError) { Kura.open(path, "r") }
    end
  end

  # Kura.check finds a flipped byte (inspect's healthy cannot), and a read's error names
  # the file (issue 43).
  def test_check_reports_damage_and_broken_data_names_the_file
    path = File.join(@dir, "checked.kuh")
    Kura.open(path, "c", num_buckets: 16) { |db| 8.times { |i| db["key#{i}"] = "MARKER-#{i}-value" } }
    assert_equal({clean: true, records: 8, pages: 0, problems: 0, first_problems: []}, Kura.check(path))
    data = File.binread(path)
    at = data.index("MARKER-3") + 2
    data.setbyte(at, data.getbyte(at) ^ 0x10)
    File.binwrite(path, data)
    report = Kura.check(path)
    refute report[:clean]
    assert_equal [7, 1], [report[:records], report[:problems]]
    assert_match(/checksum mismatch/, report[:first_problems].first)
    error = Kura.open(path, "r") { |db| assert_raises(Kura::BrokenDataError) { db["key3"] } }
    assert_includes error.message, path
  end
end
