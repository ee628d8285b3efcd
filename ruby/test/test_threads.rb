# frozen_string_literal: true

# Threads: Ruby threads sharing one Kura::DB read and write concurrently without losing a
# write or deadlocking (the compressed configurations run their record calls with the GVL
# released), and an exception or a `break` inside a batch or an each block leaves no lock
# held and the database usable. No timings are asserted.

require "test_helper"
require "timeout"

class ThreadsTest < Minitest::Test
  include KuraTest::TempDir
  extend KuraTest::PerEngine

  THREADS = 4
  PER_THREAD = 400
  # Generous: a deadlock fails the test instead of hanging `make test`.
  DEADLINE = 120

  for_each_configuration("concurrent_readers_and_writers") do |engine, options|
    Kura.open(db_path(engine), "n", **options) do |db|
      Timeout.timeout(DEADLINE) do
        writers = Array.new(THREADS) do |t|
          Thread.new do
            PER_THREAD.times do |i|
              db["w#{t}-#{i}"] = "v#{i}"
              db.increment("total")
              raise "lost w#{t}-#{i}" unless db["w#{t}-#{i}"] == "v#{i}"
            end
          end
        end
        readers = Array.new(2) do
          Thread.new do
            seen = 0
            20.times { seen = [seen, db.each_key.count { |key| key.start_with?("w") }].max }
            seen
          end
        end
        writers.each(&:join)
        readers.each { |reader| assert_operator reader.value, :<=, THREADS * PER_THREAD }
      end
      assert_equal THREADS * PER_THREAD + 1, db.size
      assert_equal THREADS * PER_THREAD, db["total"].unpack1("q>")
      THREADS.times { |t| PER_THREAD.times { |i| assert_equal "v#{i}", db["w#{t}-#{i}"] } }
    end
  end

  for_each_configuration("exceptions_in_blocks_leave_the_database_usable") do |engine, options|
    Kura.open(db_path(engine), "n", **options) do |db|
      300.times { |i| db[format("k%03d", i)] = "v" }
      assert_raises(RuntimeError) do
        db.batch do |b|
          b.put("batched", "x")
          b.delete("k000")
          raise "in batch"
        end
      end
      assert_nil db["batched"]
      assert_equal "v", db["k000"]

      assert_raises(RuntimeError) { db.each { |key, _| raise "in each" if key } }
      assert_raises(RuntimeError) { db.each_value { raise "in each_value" } }
      first = db.each_key { |key| break key }
      assert_kind_of String, first
      assert_equal 3, db.each.first(3).size
      thrown = catch(:out) { db.each { |key, _| throw :out, key } }
      assert_kind_of String, thrown

      # Another thread writes at once: nothing was left locked.
      Timeout.timeout(DEADLINE) { Thread.new { db["other thread"] = "ok" }.join }
      db.batch { |b| b.put("batched", "y") }
      assert_equal "y", db["batched"]
      assert_equal 302, db.size
    end
  end

  # Writes from other threads while one thread walks the database in chunks.
  for_each_configuration("walk_while_others_write") do |engine, options|
    Kura.open(db_path(engine), "n", **options) do |db|
      1000.times { |i| db[format("base%04d", i)] = "b" }
      Timeout.timeout(DEADLINE) do
        writer = Thread.new { 1000.times { |i| db[format("new%04d", i)] = "n"; db.delete(format("base%04d", i)) if i.even? } }
        walked = db.each_key.to_a
        writer.join
        assert_equal walked.uniq, walked
        walked.each { |key| assert(key.start_with?("base", "new"), key) }
      end
      assert_equal 1500, db.size
    end
  end

  # Record calls while another thread rebuilds, syncs and walks: the record calls then
  # release the GVL too (they may wait for the lock of the long call); nothing is lost.
  for_each_configuration("record_calls_during_long_calls") do |engine, options|
    Kura.open(db_path(engine), "n", **options) do |db|
      200.times { |i| db["seed#{i}"] = "s" }
      Timeout.timeout(DEADLINE) do
        stop = false
        first_round = Queue.new
        maintainer = Thread.new do
          rounds = 0
          until stop
            db.rebuild
            db.sync
            db.each_key { nil }
            rounds += 1
            first_round << true if rounds == 1
          end
          rounds
        end
        write = ->(i) { db["live#{i}"] = "l#{i}"; raise "lost live#{i}" unless db["live#{i}"] == "l#{i}" }
        250.times(&write)
        first_round.pop # the rest overlaps the maintainer's later rounds
        (250...500).each(&write)
        stop = true
        assert_operator maintainer.value, :>=, 1
      end
      assert_equal 700, db.size
    end
  end

  # The decision comes from the engine's typed codec, not a property's name: a zstd
  # CompactDbm (bucket_comp) releases the GVL around reads as a zstd HashDbm or TreeDbm
  # does; an uncompressed one keeps it. Two threads reading it in parallel see every value;
  # the speed-up is measured by bench/ruby.py, not asserted here.
  def test_reads_that_decompress_release_the_gvl_whatever_the_engine_calls_its_codec
    with_codec = Kura.engines.select { |e| e[:codec_param] }
    assert_equal "bucket_comp", with_codec.find { |e| e[:name] == "compact" }&.fetch(:codec_param)
    with_codec.each do |engine|
      codec_param = engine[:codec_param].to_sym
      Kura.open(db_path(engine), "n", codec_param => "none") { |db| refute_predicate db, :release_gvl? }
      Kura.open(db_path(engine), "n", codec_param => "zstd") do |db|
        assert_predicate db, :release_gvl?
        600.times { |i| db[format("%08d", i)] = format("%08d", i) * 8 }
        Timeout.timeout(DEADLINE) do
          Array.new(2) { |t| Thread.new { (t..599).step(2).all? { |i| db[format("%08d", i)] == format("%08d", i) * 8 } } }
               .each { |thread| assert thread.value }
        end
      end
    end
  end
  # The GVL is let go inside each read of a zstd CompactDbm, not only between reads: a thread
  # that counts only while a flag says the main thread is inside a read, and that thread is in a
  # region without the GVL (status "sleep"; a thread holding the GVL in native code, or waiting
  # for it after a time slice, is "run"), counts in some of 20 reads of a multi-megabyte
  # value; with release_gvl: false it never does. Nothing is timed: each read only needs the
  # other thread to be woken while the value decompresses.
  def test_a_zstd_compact_dbm_read_lets_another_thread_run_during_the_read
    value = (0...150_000).map { |i| format("%08d value that compresses;", i) }.join
    [nil, false].each do |release|
      options = release.nil? ? {} : { release_gvl: release }
      Kura.open(File.join(@dir, "db#{release.inspect}.kumz"), "n", bucket_comp: "zstd", **options) do |db|
        assert_equal release.nil?, db.release_gvl?
        db["big"] = value
        during = reads_seen_by_another_thread(db, "big", value, 20)
        if release.nil?
          assert_operator during, :>, 0, "no other thread ran during 20 reads: the read held the GVL"
        else
          assert_equal 0, during, "another thread saw #{during} of 20 reads that hold the GVL without it"
        end
      end
    end
  end

  private

  # How many of `reads` reads of `key` another thread saw the main thread make without the GVL.
  def reads_seen_by_another_thread(db, key, value, reads)
    main = Thread.current
    inside = false
    seen = 0
    stop = false
    watcher = Thread.new { seen += 1 if inside && main.status == "sleep" until stop }
    begin
      (1..reads).count do
        before = seen
        inside = true
        read = db[key]
        inside = false
        raise "read #{read.bytesize} bytes, wrote #{value.bytesize}" unless read == value

        seen != before
      end
    ensure
      stop = true
      Timeout.timeout(DEADLINE) { watcher.join }
    end
  end
end
