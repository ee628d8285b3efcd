// tkrzw_get: random-order Get of every key of a TSV file from a Tkrzw database, the Tkrzw
// side of Kura's dictionary benchmark (bench/run.py). It mirrors `kura bench --keys-from`:
// the keys (first column of each line with a tab) are shuffled by Fisher-Yates driven by
// SplitMix64 with the same seed, so both programs read the keys in the same order; each
// thread gets a disjoint, contiguous share of the shuffled list, so every key is read once.
//
// Build: g++ -O2 -std=c++17 bench/tkrzw_get.cc -o tkrzw_get -ltkrzw -lpthread
//   (libtkrzw.so brings its codec libraries itself; `pkg-config --libs tkrzw` also names
//   their -dev packages, which are not needed for dynamic linking.)
// Usage: tkrzw_get DB.tkh|DB.tkt KEYS.tsv [THREADS] [--scan] [--range N] [--count M]
//   PolyDBM picks the engine by the extension (.tkh HashDBM, .tkt TreeDBM). On an ordered
//   database, --scan adds a full forward and a full backward scan with one iterator, and
//   --range N adds M (default 10000) range scans, each a Jump to one of the shuffled keys then
//   N records forward, split among the threads: `kura bench --keys-from --scan --range-scan N
//   --iter M` does the same.
// Prints one JSON line per phase like kura's: engine, phase, threads, operations, records,
// elapsed_s, qps, file_size, rss_bytes, misses. Exit 1 if any key is missing or on error.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "split_mix.h"
#include "tkrzw_dbm_poly.h"

namespace {

// The same generator and seed as crates/kura-cli/src/bench/workload.rs.
constexpr uint64_t kShuffleSeed = 0x6b757261;  // "kura"

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

// The shuffled keys packed end to end in one buffer, in the order they are read, as `kura
// bench --keys-from` packs its own: fetching the next key is a sequential read on both sides,
// so neither program measures the cache misses of a list of separately allocated keys.
class KeyList {
 public:
  explicit KeyList(const std::vector<std::string>& keys) {
    for (const auto& key : keys) {
      bytes_.append(key);
      ends_.push_back(bytes_.size());
    }
  }
  size_t size() const { return ends_.size(); }
  std::string_view Get(size_t index) const {
    const size_t start = index == 0 ? 0 : ends_[index - 1];
    return std::string_view(bytes_).substr(start, ends_[index] - start);
  }

 private:
  std::string bytes_;
  std::vector<size_t> ends_;
};

uint64_t ResidentBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return 0;
}

// "tree" for .tkt, "hash" for .tkh and anything else PolyDBM opens as a hash.
std::string EngineName(const std::string& path) {
  const size_t dot = path.rfind('.');
  const std::string extension = dot == std::string::npos ? "" : path.substr(dot + 1);
  if (extension == "tkt") return "tree";
  if (extension == "tks") return "skip";
  return "hash";
}

void PrintPhase(const std::string& engine, const char* phase, int threads, uint64_t operations,
                tkrzw::DBM* dbm, double elapsed, uint64_t misses, const std::string& extra) {
  std::printf(
      "{\"engine\":\"tkrzw-%s\",\"phase\":\"%s\",\"threads\":%d,\"operations\":%llu,"
      "\"records\":%lld,\"elapsed_s\":%.6f,\"qps\":%.1f,\"file_size\":%lld,"
      "\"rss_bytes\":%llu,\"misses\":%llu%s}\n",
      engine.c_str(), phase, threads, static_cast<unsigned long long>(operations),
      static_cast<long long>(dbm->CountSimple()), elapsed,
      elapsed > 0 ? operations / elapsed : 0.0, static_cast<long long>(dbm->GetFileSizeSimple()),
      static_cast<unsigned long long>(ResidentBytes()), static_cast<unsigned long long>(misses),
      extra.c_str());
  std::fflush(stdout);
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// One iterator over every record, forward or backward; returns the records read. Backward
// starts with JumpLower(the greatest key, inclusive), not Last(): in Tkrzw 1.0.25,
// TreeDBM's Last() lands on the last record of the first leaf page, so a scan from there
// stops after one page.
uint64_t FullScan(tkrzw::DBM* dbm, bool backward, const std::string& greatest_key) {
  auto iter = dbm->MakeIterator();
  if (!(backward ? iter->JumpLower(greatest_key, true) : iter->First()).IsOK()) return 0;
  std::string key, value;
  uint64_t visited = 0;
  while (iter->Get(&key, &value).IsOK()) {
    visited++;
    if (!(backward ? iter->Previous() : iter->Next()).IsOK()) break;
  }
  return visited;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: tkrzw_get DB.tkh|DB.tkt KEYS.tsv [THREADS] [--scan] [--range N] "
                 "[--count M]\n";
    return 2;
  }
  const std::string db_path = argv[1];
  int threads = 1;
  bool scan = false;
  uint64_t span = 0;
  uint64_t range_count = 10000;
  for (int i = 3; i < argc; i++) {
    if (std::strcmp(argv[i], "--scan") == 0) {
      scan = true;
    } else if (std::strcmp(argv[i], "--range") == 0 && i + 1 < argc) {
      span = std::max<long long>(1, std::atoll(argv[++i]));
    } else if (std::strcmp(argv[i], "--count") == 0 && i + 1 < argc) {
      range_count = std::max<long long>(1, std::atoll(argv[++i]));
    } else {
      threads = std::max(1, std::atoi(argv[i]));
    }
  }
  const std::string engine = EngineName(db_path);

  std::vector<std::string> read_keys = ReadKeys(argv[2]);
  SplitMix64 rng(kShuffleSeed);
  for (size_t last = read_keys.size(); last > 1; last--) {
    std::swap(read_keys[last - 1], read_keys[rng.Below(last)]);
  }
  const KeyList keys(read_keys);
  read_keys.clear();
  read_keys.shrink_to_fit();

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
        if (!dbm.Get(keys.Get(i), &value).IsOK()) missed++;
      }
      misses += missed;
    });
  }
  for (auto& worker : workers) worker.join();
  const double elapsed = SecondsSince(start);
  PrintPhase(engine, "get", threads, keys.size(), &dbm, elapsed, misses.load(), "");

  if (scan) {
    std::string greatest_key;
    for (size_t i = 0; i < keys.size(); i++) {
      if (keys.Get(i) > greatest_key) greatest_key = std::string(keys.Get(i));
    }
    for (const bool backward : {false, true}) {
      const auto scan_start = std::chrono::steady_clock::now();
      const uint64_t visited = FullScan(&dbm, backward, greatest_key);
      PrintPhase(engine, backward ? "scan_back" : "scan", 1, visited, &dbm,
                 SecondsSince(scan_start), 0, "");
    }
  }
  if (span > 0 && keys.size() > 0) {
    // Scan i of thread t starts at shuffled key t * per_thread + i, as kura's does.
    const uint64_t starts = std::min<uint64_t>(keys.size(), range_count);
    const uint64_t per_thread = std::max<uint64_t>(1, starts / threads);
    std::atomic<uint64_t> records_read(0);
    const auto range_start = std::chrono::steady_clock::now();
    std::vector<std::thread> scanners;
    for (int t = 0; t < threads; t++) {
      scanners.emplace_back([&, t]() {
        auto iter = dbm.MakeIterator();
        std::string key, value;
        uint64_t read_here = 0;
        for (uint64_t i = 0; i < per_thread; i++) {
          const std::string_view start_key = keys.Get((t * per_thread + i) % keys.size());
          if (!iter->Jump(start_key).IsOK()) continue;
          for (uint64_t n = 0; n < span && iter->Get(&key, &value).IsOK(); n++) {
            read_here++;
            if (!iter->Next().IsOK()) break;
          }
        }
        records_read += read_here;
      });
    }
    for (auto& scanner : scanners) scanner.join();
    const std::string extra = ",\"span\":" + std::to_string(span) +
                              ",\"records_read\":" + std::to_string(records_read.load());
    PrintPhase(engine, "range", threads, per_thread * threads, &dbm, SecondsSince(range_start), 0,
               extra);
  }
  dbm.Close();
  return misses.load() == 0 ? 0 : 1;
}
