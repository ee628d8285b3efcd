// tkrzw_cache: Tkrzw's CacheDBM at the engine level, the Tkrzw side of bench/cache_engines.py
// (issue 42's "memory <= 0.8x Tkrzw CacheDBM's, set and get >= 1.2x its QPS"). It exists
// because `tkrzw_dbm_perf sequence --dbm cache` cannot time CacheDBM's gets (its get phase
// walks the database with an iterator whose every step costs O(records), so 1M records do not
// finish in 10 minutes, and `--get_only` opens a new, empty database): this driver keeps one
// CacheDBM open, sets, then gets from it directly.
//
// The workload, step for step crates/kura-bench/src/bin/cache_engines.rs (Kura's side):
// - a CacheDBM with cap_rec_num = records * 5 / 4 + 1024 (the registry's benchmark cap for
//   Kura's caches, room for every key: nothing is evicted, which count() confirms);
// - set the keys `%08d` of 0 .. records-1 in that order (`kura bench`'s sequential keys,
//   as `tkrzw_dbm_perf sequence` makes them), each with a value of VALUE_SIZE bytes that names
//   its key: the key's digits, then 'a' + (index + position) % 26;
// - get every key in the same order, then every key again in a shuffled order (SplitMix64,
//   seed "kura", split_mix.h), each value copied into one reused std::string and compared
//   with the value set: a missing or wrong value stops the driver with exit status 1;
// - the resident set after the sets minus before them (/proc/self/statm, after malloc_trim);
// - untimed, a digest of every key and value (FNV-1a), which must equal Kura's side's.
//
// Build: g++ -O2 -std=c++17 $(pkg-config --cflags tkrzw) bench/tkrzw_cache.cc -o tkrzw_cache \
//        $(pkg-config --libs tkrzw)        (the Makefile's target does this)
// Usage: tkrzw_cache [RECORDS] [VALUE_SIZE] [CAP_REC_NUM]   (default 1000000, 100 and the cap
// above); prints one JSON line. CacheDBM sizes its bucket arrays by the cap (1.2 buckets of 8
// bytes per capped record), so a smaller cap that still evicts nothing shows what that costs.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <malloc.h>
#include <unistd.h>

#include "split_mix.h"
#include "tkrzw_dbm_cache.h"

namespace {

// The seed of the shuffled get order ("kura"), as on Kura's side.
constexpr uint64_t SHUFFLE_SEED = 0x6b757261;

// After malloc_trim, as Kura's side measures: memory freed again is not the cache's.
uint64_t ResidentBytes() {
  malloc_trim(0);
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

// `%08d` of the index, written by hand (least significant digit first, then reversed):
// snprintf took a sizeable share of a get.
void MakeKey(uint64_t index, std::string* key) {
  key->clear();
  while (index > 0 || key->size() < 8) {
    key->push_back('0' + index % 10);
    index /= 10;
  }
  std::reverse(key->begin(), key->end());
}

// The value of key `index`: its key's digits, then letters that shift with the index, that is
// 'a' + (index + position) % 26, taken as a window of `letters` (the alphabet repeated).
void MakeValue(const std::string& key, uint64_t index, size_t size, const std::string& letters,
               std::string* value) {
  const size_t prefix = std::min(key.size(), size);
  value->assign(key, 0, prefix);
  value->append(letters, (index + prefix) % 26, size - prefix);
}

// The alphabet repeated over 26 + size bytes: every window MakeValue takes.
std::string Letters(size_t size) {
  std::string letters(26 + size, 'a');
  for (size_t i = 0; i < letters.size(); i++) letters[i] = 'a' + i % 26;
  return letters;
}

// FNV-1a over every key and value of the workload, in set order, computed untimed: the
// benchmark script checks that both sides print the same, i.e. that they did the same work.
uint64_t WorkloadDigest(uint64_t records, size_t value_size, const std::string& letters) {
  uint64_t digest = 0xcbf29ce484222325ULL;
  std::string key, value;
  for (uint64_t index = 0; index < records; index++) {
    MakeKey(index, &key);
    MakeValue(key, index, value_size, letters, &value);
    for (const std::string* bytes : {&key, &value}) {
      for (const char byte : *bytes) digest = (digest ^ static_cast<uint8_t>(byte)) * 0x100000001b3ULL;
    }
  }
  return digest;
}

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Gets every key of `order`, checking each value; the seconds it took, or -1 on a wrong value.
double TimedGets(tkrzw::CacheDBM* dbm, const std::vector<uint64_t>& order, size_t value_size) {
  const std::string letters = Letters(value_size);
  std::string key, expected, value;
  const auto start = std::chrono::steady_clock::now();
  for (const uint64_t index : order) {
    MakeKey(index, &key);
    MakeValue(key, index, value_size, letters, &expected);
    if (!dbm->Get(key, &value).IsOK() || value != expected) {
      std::cerr << "tkrzw_cache: key " << key << " did not return the value set\n";
      return -1;
    }
  }
  return Seconds(start);
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t records = argc > 1 ? std::stoull(argv[1]) : 1000000;
  const size_t value_size = argc > 2 ? std::stoull(argv[2]) : 100;
  if (records == 0) {
    std::cerr << "usage: tkrzw_cache [RECORDS > 0] [VALUE_SIZE]\n";
    return 2;
  }
  std::vector<uint64_t> in_order(records);
  for (uint64_t i = 0; i < records; i++) in_order[i] = i;
  std::vector<uint64_t> shuffled = in_order;
  SplitMix64 rng(SHUFFLE_SEED);
  for (size_t last = shuffled.size() - 1; last > 0; last--) std::swap(shuffled[last], shuffled[rng.Below(last + 1)]);

  const uint64_t digest = WorkloadDigest(records, value_size, Letters(value_size));
  const int64_t cap_rec_num =
      argc > 3 ? std::stoll(argv[3]) : static_cast<int64_t>(records * 5 / 4 + 1024);
  const uint64_t rss_before = ResidentBytes();
  tkrzw::CacheDBM dbm(cap_rec_num, -1);
  const std::string letters = Letters(value_size);
  std::string key, value;
  const auto set_start = std::chrono::steady_clock::now();
  for (const uint64_t index : in_order) {
    MakeKey(index, &key);
    MakeValue(key, index, value_size, letters, &value);
    if (!dbm.Set(key, value).IsOK()) {
      std::cerr << "tkrzw_cache: setting " << key << " failed\n";
      return 1;
    }
  }
  const double set_s = Seconds(set_start);
  const uint64_t rss_after = ResidentBytes();
  int64_t count = 0;
  dbm.Count(&count);
  if (count != static_cast<int64_t>(records)) {
    std::cerr << "tkrzw_cache: " << count << " records after " << records << " sets (evicted?)\n";
    return 1;
  }
  const double get_s = TimedGets(&dbm, in_order, value_size);
  const double get_random_s = get_s < 0 ? -1 : TimedGets(&dbm, shuffled, value_size);
  if (get_random_s < 0) return 1;
  const uint64_t grown = rss_after > rss_before ? rss_after - rss_before : 0;
  std::printf(
      "{\"engine\":\"tkrzw-cache\",\"records\":%llu,\"value_size\":%zu,\"cap_rec_num\":%lld,"
      "\"count\":%lld,\"set_s\":%.6f,\"set_qps\":%.1f,\"get_s\":%.6f,\"get_qps\":%.1f,"
      "\"get_random_s\":%.6f,\"get_random_qps\":%.1f,\"rss_before\":%llu,\"rss_after_set\":%llu,"
      "\"rss_growth\":%llu,\"bytes_per_record\":%.2f,\"values_checked\":%llu,"
      "\"workload_digest\":\"%016llx\"}\n",
      static_cast<unsigned long long>(records), value_size, static_cast<long long>(cap_rec_num),
      static_cast<long long>(count), set_s, records / set_s, get_s, records / get_s, get_random_s,
      records / get_random_s, static_cast<unsigned long long>(rss_before),
      static_cast<unsigned long long>(rss_after), static_cast<unsigned long long>(grown),
      static_cast<double>(grown) / records, static_cast<unsigned long long>(2 * records),
      static_cast<unsigned long long>(digest));
  return 0;
}
