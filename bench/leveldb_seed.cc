// The seed's workload against LevelDB itself (Debian's libleveldb), for bench/ruby.py: N
// keys "%016d" with equal values written with Put, then read with Get, default options, as
// leveldb-ruby drives it. It bounds what any Ruby binding of LevelDB can reach.
//
//   g++ -O2 -o leveldb_seed bench/leveldb_seed.cc -lleveldb
//   leveldb_seed RECORDS DIR   ->   {"store": "leveldb-c++", "records": N, "write_s": .., "read_s": ..}
//
// Each timed span covers opening, the loop (key formatting included) and closing, like
// bench/ruby_seed.rb.

#include <leveldb/db.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "leveldb_open.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: leveldb_seed RECORDS DIR\n");
    return 2;
  }
  const long records = std::strtol(argv[1], nullptr, 10);
  const std::string path = std::string(argv[2]) + "/seed.leveldb";
  char key[32];

  auto start = std::chrono::steady_clock::now();
  {
    auto db = OpenLevelDb("leveldb_seed", path, true);
    leveldb::WriteOptions write_options;
    for (long i = 0; i < records; ++i) {
      int length = std::snprintf(key, sizeof(key), "%016ld", i);
      leveldb::Slice slice(key, length);
      if (!db->Put(write_options, slice, slice).ok()) {
        std::fprintf(stderr, "leveldb_seed: put failed\n");
        return 1;
      }
    }
  }
  const double write_s = SecondsSince(start);

  start = std::chrono::steady_clock::now();
  long found = 0;
  {
    auto db = OpenLevelDb("leveldb_seed", path, false);
    leveldb::ReadOptions read_options;
    std::string value;
    for (long i = 0; i < records; ++i) {
      int length = std::snprintf(key, sizeof(key), "%016ld", i);
      if (db->Get(read_options, leveldb::Slice(key, length), &value).ok() && value.size() == 16) ++found;
    }
  }
  const double read_s = SecondsSince(start);
  if (found != records) {
    std::fprintf(stderr, "leveldb_seed: read %ld of %ld records\n", found, records);
    return 1;
  }
  std::printf("{\"store\": \"leveldb-c++\", \"records\": %ld, \"write_s\": %.6f, \"read_s\": %.6f}\n", records,
              write_s, read_s);
  return 0;
}
