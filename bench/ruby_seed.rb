# frozen_string_literal: true

# One side of bench/ruby.py, run in its own Ruby process: the seed's workload (`"%016d" % i`
# keys with equal values, written then read through `db[k] = v` / `db[k]`) on one store,
# or the two-thread read of a zstd-compressed database. Prints one JSON object.
#
#   ruby -Iruby/lib bench/ruby_seed.rb seed STORE RECORDS DIR    STORE: kura-tree kura-hash dbm hash
#   ruby -Iruby/lib bench/ruby_seed.rb zstd-threads ENGINE RECORDS DIR      ENGINE: hash tree
#
# The timed spans are the whole Ruby program's: opening, every key formatted and every
# call made, and closing (which flushes), as in bench/leveldb_seed.cc.

require "json"

def timed
  start = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  yield
  Process.clock_gettime(Process::CLOCK_MONOTONIC) - start
end

# Opens a store for writing or reading: an object with []=, [] and close.
def open_store(store, dir, records, writing)
  case store
  when "kura-tree", "kura-hash"
    require "kura"
    engine = store.delete_prefix("kura-")
    extension = Kura.engines.find { |e| e[:name] == engine }[:extension]
    Kura.open(File.join(dir, "seed.#{extension}"), writing ? "n" : "r", **Kura.sized_params(engine, records))
  when "dbm"
    require "dbm"
    DBM.open(File.join(dir, "seed-dbm"), 0o644, writing ? DBM::NEWDB : DBM::READER)
  else
    raise ArgumentError, "unknown store #{store}"
  end
end

def seed(store, records, dir)
  if store == "hash"
    hash = {}
    write_s = timed { i = 0; while i < records; key = format("%016d", i); hash[key] = key; i += 1; end }
    found = 0
    read_s = timed { i = 0; while i < records; found += 1 if hash[format("%016d", i)]; i += 1; end }
  else
    write_s = timed do
      db = open_store(store, dir, records, true)
      i = 0
      while i < records
        key = format("%016d", i)
        db[key] = key
        i += 1
      end
      db.close
    end
    found = 0
    read_s = timed do
      db = open_store(store, dir, records, false)
      i = 0
      while i < records
        found += 1 if db[format("%016d", i)]
        i += 1
      end
      db.close
    end
  end
  raise "#{store}: read #{found} of #{records} records" unless found == records

  { store: store, records: records, write_s: write_s, read_s: read_s }
end

# Reads every record of a zstd database from 1 thread, then from 2 threads (each half of
# the keys): values of 1 KiB of text. HashDbm compresses each record, so every read
# decompresses one (most of a read's time, spent with the GVL released); TreeDbm compresses
# pages and keeps recently read ones in its cache.
def zstd_threads(engine, records, dir)
  require "kura"
  extension = Kura.engines.find { |e| e[:name] == engine }[:extension]
  path = File.join(dir, "zstd.#{extension}")
  params = Kura.sized_params(engine, records).merge(record_comp: "zstd")
  value_of = ->(i) { ("record #{i}: the quick brown fox jumps over the lazy dog. " * 18).b }
  Kura.open(path, "n", **params) { |db| records.times { |i| db[format("%016d", i)] = value_of.(i) } }
  Kura.open(path, "r", **params) do |db|
    read_range = lambda do |first, step|
      i = first
      n = 0
      while i < records
        n += 1 if db[format("%016d", i)]
        i += step
      end
      n
    end
    read_range.(0, 1) # warm the page cache
    one_s = timed { raise "missing records" unless read_range.(0, 1) == records }
    two_s = timed do
      threads = Array.new(2) { |t| Thread.new { read_range.(t, 2) } }
      raise "missing records" unless threads.sum(&:value) == records
    end
    { engine: engine, records: records, one_thread_s: one_s, two_threads_s: two_s, releases_gvl: db.release_gvl? }
  end
end

case ARGV[0]
when "seed" then puts JSON.generate(seed(ARGV[1], Integer(ARGV[2]), ARGV[3]))
when "zstd-threads" then puts JSON.generate(zstd_threads(ARGV[1], Integer(ARGV[2]), ARGV[3]))
else abort "usage: ruby_seed.rb seed STORE RECORDS DIR | zstd-threads ENGINE RECORDS DIR"
end
