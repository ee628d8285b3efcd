// The sequence workload of `kura bench` against LevelDB itself (Debian's libleveldb), so that
// make bench shows TreeDbm's gets, batched and single, next to LevelDB's reads (issue #20):
// the same keys in the same order (zero-padded numbers, sequential or drawn by SplitMix64
// seeded with the thread's number, as crates/kura-cli/src/bench/workload.rs draws them), the
// same 8-byte values, THREADS threads each doing ITER operations per phase.
//
//   g++ -O2 -std=c++17 -o leveldb_sequence bench/leveldb_sequence.cc -lleveldb -lpthread
//   leveldb_sequence ITER THREADS RANDOM(0|1) VALUE_SIZE DIR     (the database: DIR/sequence.leveldb)
//
// Prints one JSON line per phase, as `kura bench --json` does: set, get, remove, each timed
// from the first operation to the last with the database open; opening and closing are not
// timed, as in `kura bench`. (`kura bench` also times a `synchronize(false)` at the end of
// set and remove, which hands its dirty pages to the OS; LevelDB has handed each write's log
// record to the OS already, with `write(2)`, when its loop ends.)
//
// LevelDB gets the memory TreeDbm has by default: a 256 MiB block cache (TreeDbm caches
// 256 MiB of decoded pages) and a 64 MiB write buffer (TreeDbm keeps up to 10,000 dirty 8 KiB
// pages); otherwise LevelDB's defaults: Snappy compression, no Bloom filter, no sync per
// write. `file_size` is the settled size after the set phase: the database reopened and
// fully compacted (untimed), counting its tables, log and manifest, not its text LOG files.

#include <leveldb/cache.h>
#include <leveldb/db.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "leveldb_open.h"
#include "split_mix.h"

namespace {

// The distance between value offsets, as in Tkrzw and `kura bench`.
constexpr uint64_t kValueSpread = 2039;

// `KeyOrder` of workload.rs: thread t's i-th key number.
class KeyOrder {
 public:
  KeyOrder(bool random, uint64_t thread_id, uint64_t threads, uint64_t iterations)
      : random_(random), thread_id_(thread_id), threads_(threads), rng_(thread_id),
        key_count_(iterations * threads) {}
  uint64_t KeyNumber(uint64_t i) { return random_ ? rng_.Below(key_count_) : i * threads_ + thread_id_; }

 private:
  bool random_;
  uint64_t thread_id_;
  uint64_t threads_;
  SplitMix64 rng_;
  uint64_t key_count_;
};

// `Values` of workload.rs: the window of a patterned buffer at (i * (i + 1)) mod 2039.
class Values {
 public:
  Values(uint64_t thread_id, size_t size) : size_(size) {
    for (size_t j = 0; j < size + kValueSpread; ++j) {
      const size_t period = j % 2 == 1 ? 26 : 9;
      pattern_.push_back(static_cast<char>('a' + (thread_id + j) % period));
    }
  }
  leveldb::Slice Get(uint64_t i) const {
    const uint32_t product = static_cast<uint32_t>(i * (i + 1));
    return leveldb::Slice(pattern_.data() + product % kValueSpread, size_);
  }

 private:
  std::string pattern_;
  size_t size_;
};

// Ends the process at once: a worker thread may call this while others still use the
// database, so no destructor may run.
[[noreturn]] void Fail(const std::string& what, const leveldb::Status& status) {
  std::fprintf(stderr, "leveldb_sequence: %s: %s\n", what.c_str(), status.ToString().c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

// The bytes of the database's own files (tables, logs, manifest, CURRENT), not its text LOG.
uint64_t DatabaseBytes(const std::string& path) {
  uint64_t total = 0;
  for (const auto& entry : std::filesystem::directory_iterator(path)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && name.rfind("LOG", 0) != 0) total += entry.file_size();
  }
  return total;
}

// The options of every open: TreeDbm's default memory (see the header), LevelDB's other defaults.
leveldb::Options SameMemoryAsTreeDbm() {
  leveldb::Options options;
  options.block_cache = leveldb::NewLRUCache(256 << 20);
  options.write_buffer_size = 64 << 20;
  return options;
}

// `kura bench`'s format_key: the number in decimal, zero-padded to at least 8 digits.
int FormatKey(uint64_t number, char* out, size_t room) {
  return std::snprintf(out, room, "%08llu", static_cast<unsigned long long>(number));
}

struct Args {
  uint64_t iterations;
  uint64_t threads;
  bool random;
  size_t value_size;
  std::string path;
};

// Runs `operation(db, key, value)` (false: a miss) ITER times on each thread, with thread t's
// keys and values; returns the seconds from the start to the last thread's end and the misses.
template <typename Operation>
std::pair<double, uint64_t> RunThreads(leveldb::DB* db, const Args& args, Operation operation) {
  std::atomic<uint64_t> misses{0};
  std::vector<std::thread> workers;
  const auto start = std::chrono::steady_clock::now();
  for (uint64_t thread_id = 0; thread_id < args.threads; ++thread_id) {
    workers.emplace_back([&, thread_id] {
      KeyOrder keys(args.random, thread_id, args.threads, args.iterations);
      Values values(thread_id, args.value_size);
      char key[32];
      uint64_t missed = 0;
      for (uint64_t i = 0; i < args.iterations; ++i) {
        const int length = FormatKey(keys.KeyNumber(i), key, sizeof(key));
        if (!operation(db, leveldb::Slice(key, length), values.Get(i))) ++missed;
      }
      misses += missed;
    });
  }
  for (auto& worker : workers) worker.join();
  return {SecondsSince(start), misses.load()};
}

void PrintPhase(const char* phase, const Args& args, double seconds, uint64_t misses, uint64_t file_size) {
  const uint64_t operations = args.iterations * args.threads;
  // A phase too short for the clock counts as one nanosecond, so that the QPS stays finite.
  seconds = seconds > 0 ? seconds : 1e-9;
  std::printf(
      "{\"engine\": \"leveldb\", \"phase\": \"%s\", \"threads\": %llu, \"operations\": %llu, "
      "\"elapsed_s\": %.6f, \"qps\": %.1f, \"misses\": %llu, \"file_size\": %llu}\n",
      phase, static_cast<unsigned long long>(args.threads), static_cast<unsigned long long>(operations), seconds,
      operations / seconds, static_cast<unsigned long long>(misses), static_cast<unsigned long long>(file_size));
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: leveldb_sequence ITER THREADS RANDOM(0|1) VALUE_SIZE DIR\n");
    return 2;
  }
  const Args args{std::strtoull(argv[1], nullptr, 10), std::strtoull(argv[2], nullptr, 10),
                  std::strtol(argv[3], nullptr, 10) != 0, std::strtoull(argv[4], nullptr, 10),
                  std::string(argv[5]) + "/sequence.leveldb"};
  if (args.threads == 0 || args.iterations == 0) {
    std::fprintf(stderr, "leveldb_sequence: ITER and THREADS must be at least 1\n");
    return 2;
  }
  const char* program = "leveldb_sequence";
  const leveldb::Options options = SameMemoryAsTreeDbm();

  double seconds;
  uint64_t misses;
  {
    auto db = OpenLevelDb(program, args.path, true, options);
    const leveldb::WriteOptions write;
    std::tie(seconds, misses) = RunThreads(db.get(), args, [&](leveldb::DB* db, leveldb::Slice key, leveldb::Slice value) {
      leveldb::Status status = db->Put(write, key, value);
      if (!status.ok()) Fail("put", status);
      return true;
    });
  }
  {
    // Settled before its size is taken (untimed): the log turned into tables, all compacted.
    auto db = OpenLevelDb(program, args.path, false, options);
    db->CompactRange(nullptr, nullptr);
  }
  PrintPhase("set", args, seconds, misses, DatabaseBytes(args.path));

  {
    auto db = OpenLevelDb(program, args.path, false, options);
    const leveldb::ReadOptions read;
    std::tie(seconds, misses) = RunThreads(db.get(), args, [&](leveldb::DB* db, leveldb::Slice key, leveldb::Slice) {
      // LevelDB copies each value out (it has no zero-copy get); 8 bytes fit in the string's
      // own buffer, so this allocates nothing.
      std::string value;
      leveldb::Status status = db->Get(read, key, &value);
      if (!status.ok() && !status.IsNotFound()) Fail("get", status);
      return status.ok();
    });
  }
  PrintPhase("get", args, seconds, misses, DatabaseBytes(args.path));

  {
    auto db = OpenLevelDb(program, args.path, false, options);
    const leveldb::WriteOptions write;
    std::tie(seconds, misses) = RunThreads(db.get(), args, [&](leveldb::DB* db, leveldb::Slice key, leveldb::Slice) {
      // LevelDB's Delete does not say whether the key was there: no miss is counted.
      leveldb::Status status = db->Delete(write, key);
      if (!status.ok()) Fail("delete", status);
      return true;
    });
  }
  PrintPhase("remove", args, seconds, misses, DatabaseBytes(args.path));
  delete options.block_cache;
  return 0;
}
