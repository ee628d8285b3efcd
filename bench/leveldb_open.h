// What the two LevelDB drivers (bench/leveldb_seed.cc for the Ruby benchmark,
// bench/leveldb_sequence.cc for make bench's tree table) open and time alike: a database
// created new or required to exist, and seconds on the monotonic clock.

#ifndef KURA_BENCH_LEVELDB_OPEN_H_
#define KURA_BENCH_LEVELDB_OPEN_H_

#include <leveldb/db.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

inline double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Opens `path` with `base`'s options (LevelDB's defaults unless given): a new database when
// `create` (one already there is an error), else an existing one. Exits with the status on
// failure, naming `program`.
inline std::unique_ptr<leveldb::DB> OpenLevelDb(const char* program, const std::string& path, bool create,
                                                leveldb::Options base = leveldb::Options()) {
  leveldb::Options options = base;
  options.create_if_missing = create;
  options.error_if_exists = create;
  leveldb::DB* db = nullptr;
  leveldb::Status status = leveldb::DB::Open(options, path, &db);
  if (!status.ok()) {
    std::fprintf(stderr, "%s: open %s: %s\n", program, path.c_str(), status.ToString().c_str());
    std::exit(1);
  }
  return std::unique_ptr<leveldb::DB>(db);
}

#endif  // KURA_BENCH_LEVELDB_OPEN_H_
