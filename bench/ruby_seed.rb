# frozen_string_literal: true

# One side of bench/ruby.py, run in its own Ruby process: the seed's workload (`"%016d" % i`
# keys with equal values, written then read through `db[k] = v` / `db[k]`) on one store,
# the two-thread read of a zstd-compressed database, or the batched reads (`values_at`)
# against `db[k]`. Prints one JSON object.
#
#   ruby -Iruby/lib bench/ruby_seed.rb seed STORE RECORDS DIR    STORE: kura-tree kura-hash dbm hash
#   ruby -Iruby/lib bench/ruby_seed.rb zstd-threads ENGINE RECORDS DIR [VALUE_BYTES]   ENGINE: hash tree
#   ruby -Iruby/lib bench/ruby_seed.rb batched STORE RECORDS DIR BATCH ROUNDS    STORE: kura-tree kura-hash dbm
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

# Writes the seed's records into a new store through `db[k] = v`, then closes it.
def write_seed(store, dir, records)
  db = open_store(store, dir, records, true)
  i = 0
  while i < records
    key = format("%016d", i)
    db[key] = key
    i += 1
  end
  db.close
end

def seed(store, records, dir)
  if store == "hash"
    hash = {}
    write_s = timed { i = 0; while i < records; key = format("%016d", i); hash[key] = key; i += 1; end }
    found = 0
    read_s = timed { i = 0; while i < records; found += 1 if hash[format("%016d", i)]; i += 1; end }
  else
    write_s = timed { write_seed(store, dir, records) }
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
# the keys): values of VALUE_BYTES of English-like text (words drawn at random per record).
# HashDbm compresses each record, so every read decompresses one (the part of a read spent
# with the GVL released); TreeDbm compresses pages and keeps recently read ones in its cache.
#
# Also timed, on one thread: the same loop with the database call replaced by what a read
# costs Ruby itself with the GVL held (formatting the key, a method call, a new String of
# the value's bytes). Two threads cannot beat one by more than Amdahl's bound
# one / (ruby_only + (one - ruby_only) / 2), whatever the binding does.
WORDS = %w[the of and to in is that for it as was with be by on not he this are or his from at
           which but have an they you were her she there been one all we their has would when
           database record value key thread lock page bucket compress dictionary]
def text_value(i, bytes)
  random = Random.new(i)
  text = +""
  text << WORDS[random.rand(WORDS.size)] << " " while text.bytesize < bytes
  text.byteslice(0, bytes).b
end

def zstd_threads(engine, records, dir, value_bytes)
  require "kura"
  extension = Kura.engines.find { |e| e[:name] == engine }[:extension]
  path = File.join(dir, "zstd.#{extension}")
  params = Kura.sized_params(engine, records).merge(record_comp: "zstd")
  Kura.open(path, "n", **params) { |db| records.times { |i| db[format("%016d", i)] = text_value(i, value_bytes) } }
  sample = text_value(0, value_bytes)
  ruby_only_s = timed do
    i = 0
    while i < records
      String.new(sample)
      format("%016d", i)
      i += 1
    end
  end
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
    { engine: engine, records: records, value_bytes: value_bytes, one_thread_s: one_s, two_threads_s: two_s,
      ruby_only_s: ruby_only_s, releases_gvl: db.release_gvl? }
  end
end

# Batched reads: RECORDS records written as in `seed`, then read back twice in one process,
# every key through `db[k]` and every key through `db.values_at` in batches of BATCH keys
# (Kura: one batched lookup each, the GVL released for it; Ruby's DBM: a loop over the keys),
# the two loops taking turns over ROUNDS rounds, each round starting with the other one.
# Best time of each.
def batched(store, records, dir, batch, rounds)
  write_seed(store, dir, records)
  db = open_store(store, dir, records, false)
  loops = {
    read_s: lambda do
      found = 0
      i = 0
      while i < records
        found += 1 if db[format("%016d", i)]
        i += 1
      end
      found
    end,
    batched_s: lambda do
      found = 0
      i = 0
      while i < records
        last = [i + batch, records].min
        found += db.values_at(*(i...last).map { |n| format("%016d", n) }).count { |value| value }
        i = last
      end
      found
    end
  }
  best = loops.keys.to_h { |name| [name, Float::INFINITY] }
  rounds.times do |round|
    loops.to_a.rotate(round).each do |name, body|
      found = nil
      elapsed = timed { found = body.call }
      raise "#{store}: #{name} read #{found} of #{records} records" unless found == records

      best[name] = [best[name], elapsed].min
    end
  end
  db.close
  { store: store, records: records, batch: batch, **best }
end

case ARGV[0]
when "seed" then puts JSON.generate(seed(ARGV[1], Integer(ARGV[2]), ARGV[3]))
when "batched" then puts JSON.generate(batched(ARGV[1], Integer(ARGV[2]), ARGV[3], Integer(ARGV[4]), Integer(ARGV[5])))
when "zstd-threads" then puts JSON.generate(zstd_threads(ARGV[1], Integer(ARGV[2]), ARGV[3], Integer(ARGV[4] || 1024)))
else abort "usage: ruby_seed.rb seed STORE RECORDS DIR | zstd-threads ENGINE RECORDS DIR [VALUE_BYTES] | " \
           "batched STORE RECORDS DIR BATCH ROUNDS"
end
