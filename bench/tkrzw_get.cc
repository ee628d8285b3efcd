// tkrzw_get: random-order Get of every key of a TSV file from a Tkrzw database, the Tkrzw
// side of Kura's dictionary benchmark (bench/run.py). It mirrors `kura bench --keys-from`:
// the keys (first column of each line with a tab) are shuffled by Fisher-Yates driven by
// SplitMix64 with the same seed, so both programs read the keys in the same order; each
// thread gets a disjoint, contiguous share of the shuffled list, so every key is read once.
//
// Build: g++ -O2 -std=c++17 bench/tkrzw_get.cc -o tkrzw_get -ltkrzw -lpthread
//   (libtkrzw.so brings its codec libraries itself; `pkg-config --libs tkrzw` also names
//   their -dev packages, which are not needed for dynamic linking.)
// Usage: tkrzw_get DB.tkh KEYS.tsv [THREADS]
// Prints one JSON line like kura's: engine, phase, threads, operations, records, elapsed_s,
// qps, file_size, rss_bytes, misses. Exit 1 if any key is missing or on error.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "tkrzw_dbm_poly.h"

namespace {

// The same generator and seed as crates/kura-cli/src/bench/workload.rs.
constexpr uint64_t kShuffleSeed = 0x6b757261;  // "kura"

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // A number in [0, bound): multiply-shift, as the Rust side does.
  uint64_t Below(uint64_t bound) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * bound) >> 64);
  }

 private:
  uint64_t state_;
};

std::vector<std::string> ReadKeys(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << "tkrzw_get: cannot open " << path << "\n";
    std::exit(1);
  }
  std::vector<std::string> keys;
  std::string line;
  while (std::getline(in, line)) {
    const size_t tab = line.find('\t');
    if (tab != std::string::npos) keys.emplace_back(line, 0, tab);
  }
  return keys;
}

uint64_t ResidentBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: tkrzw_get DB.tkh KEYS.tsv [THREADS]\n";
    return 2;
  }
  const std::string db_path = argv[1];
  const int threads = argc > 3 ? std::max(1, std::atoi(argv[3])) : 1;

  std::vector<std::string> keys = ReadKeys(argv[2]);
  SplitMix64 rng(kShuffleSeed);
  for (size_t last = keys.size(); last > 1; last--) {
    std::swap(keys[last - 1], keys[rng.Below(last)]);
  }

  tkrzw::PolyDBM dbm;
  const tkrzw::Status opened = dbm.Open(db_path, false);
  if (!opened.IsOK()) {
    std::cerr << "tkrzw_get: " << db_path << ": " << opened << "\n";
    return 1;
  }

  std::atomic<uint64_t> misses(0);
  const size_t share = std::max<size_t>(1, (keys.size() + threads - 1) / threads);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (size_t begin = 0; begin < keys.size(); begin += share) {
    const size_t end = std::min(keys.size(), begin + share);
    workers.emplace_back([&, begin, end]() {
      std::string value;
      uint64_t missed = 0;
      for (size_t i = begin; i < end; i++) {
        if (!dbm.Get(keys[i], &value).IsOK()) missed++;
      }
      misses += missed;
    });
  }
  for (auto& worker : workers) worker.join();
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const int64_t records = dbm.CountSimple();
  const int64_t file_size = dbm.GetFileSizeSimple();
  std::printf(
      "{\"engine\":\"tkrzw-%s\",\"phase\":\"get\",\"threads\":%d,\"operations\":%zu,"
      "\"records\":%lld,\"elapsed_s\":%.6f,\"qps\":%.1f,\"file_size\":%lld,"
      "\"rss_bytes\":%llu,\"misses\":%llu}\n",
      "hash", threads, keys.size(), static_cast<long long>(records), elapsed,
      elapsed > 0 ? keys.size() / elapsed : 0.0, static_cast<long long>(file_size),
      static_cast<unsigned long long>(ResidentBytes()),
      static_cast<unsigned long long>(misses.load()));
  dbm.Close();
  return misses.load() == 0 ? 0 : 1;
}
