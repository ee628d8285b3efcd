// tkrzw_tiny: Tkrzw's TinyDBM (an in-memory hash table) on a TSV data set, the Tkrzw side of
// CompactDbm's density benchmark (bench/compact.py). It mirrors `kura-compact-bench run`:
// load every record, then bytes per record (resident-set growth over the load / records),
// gets in a shuffled order with 1 and 2 threads, and sets (each key overwritten with the
// next record's value) with 1 and 2 threads. Prints one JSON line with the same fields.
//
// Build: g++ -O2 -std=c++17 bench/tkrzw_tiny.cc -o tkrzw_tiny -ltkrzw -lpthread
// Usage: tkrzw_tiny DATA.tsv [GETS_PER_THREAD] [SETS_PER_THREAD]

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <malloc.h>

#include "split_mix.h"
#include "tkrzw_dbm_tiny.h"

namespace {

// After malloc_trim, as the Rust driver measures: memory freed again is not the map's.
uint64_t ResidentBytes() {
  malloc_trim(0);
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * 4096;
}

double Timed(int threads, uint64_t per_thread, const std::vector<size_t>& order,
             const std::function<void(size_t)>& op) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; t++) {
    workers.emplace_back([&, t] {
      const size_t offset = t * (order.size() / threads);
      for (uint64_t i = 0; i < per_thread; i++) op(order[(offset + i) % order.size()]);
    });
  }
  for (auto& worker : workers) worker.join();
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return threads * per_thread / std::max(elapsed, 1e-9);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: tkrzw_tiny DATA.tsv [GETS_PER_THREAD] [SETS_PER_THREAD]\n";
    return 1;
  }
  uint64_t gets = argc > 2 ? std::stoull(argv[2]) : 1000000;
  uint64_t sets = argc > 3 ? std::stoull(argv[3]) : 200000;
  std::vector<std::pair<std::string, std::string>> records;
  {
    std::ifstream in(argv[1], std::ios::binary);
    if (!in) {
      std::cerr << "tkrzw_tiny: cannot open " << argv[1] << "\n";
      return 1;
    }
    std::string line;
    while (std::getline(in, line)) {
      const size_t tab = line.find('\t');
      if (tab != std::string::npos) records.emplace_back(line.substr(0, tab), line.substr(tab + 1));
    }
  }
  if (records.empty()) return 1;
  uint64_t raw_bytes = 0;
  for (const auto& record : records) raw_bytes += record.first.size() + record.second.size();
  std::vector<size_t> order(records.size());
  for (size_t i = 0; i < order.size(); i++) order[i] = i;
  SplitMix64 rng(0x6b757261);
  for (size_t last = order.size() - 1; last > 0; last--) std::swap(order[last], order[rng.Below(last + 1)]);
  const uint64_t count = records.size();
  const uint64_t before = ResidentBytes();
  const auto start = std::chrono::steady_clock::now();
  // Buckets for every record, as TinyDbm and CompactDbm are sized for the data set.
  tkrzw::TinyDBM dbm(count);
  for (const auto& record : records) dbm.Set(record.first, record.second);
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const uint64_t grown = ResidentBytes() - before;
  gets = std::max<uint64_t>(1, std::min(gets, count * 2));
  sets = std::max<uint64_t>(1, std::min(sets, count));
  std::atomic<uint64_t> misses{0};
  double get_qps[2], set_qps[2];
  for (int threads = 1; threads <= 2; threads++) {
    get_qps[threads - 1] = Timed(threads, gets, order, [&](size_t index) {
      std::string value;
      if (!dbm.Get(records[index].first, &value).IsOK()) misses++;
    });
  }
  for (int threads = 1; threads <= 2; threads++) {
    set_qps[threads - 1] = Timed(threads, sets, order, [&](size_t index) {
      dbm.Set(records[index].first, records[(index + 1) % count].second);
    });
  }
  if (misses > 0) {
    std::cerr << "tkrzw_tiny: " << misses.load() << " stored keys were not found\n";
    return 1;
  }
  std::printf(
      "{\"contender\":\"tkrzw-tiny\",\"records\":%llu,\"raw_bytes\":%llu,\"rss_growth\":%llu,"
      "\"bytes_per_record\":%.3f,\"load_qps\":%.1f,\"get_qps_1\":%.1f,\"get_qps_2\":%.1f,"
      "\"set_qps_1\":%.1f,\"set_qps_2\":%.1f}\n",
      static_cast<unsigned long long>(count), static_cast<unsigned long long>(raw_bytes),
      static_cast<unsigned long long>(grown), static_cast<double>(grown) / count, count / load_s,
      get_qps[0], get_qps[1], set_qps[0], set_qps[1]);
  return 0;
}
