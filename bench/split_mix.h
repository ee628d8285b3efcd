// SplitMix64 for the C++ drivers of the benchmark (bench/tkrzw_get.cc, bench/tkrzw_tiny.cc,
// bench/leveldb_sequence.cc): step for step crates/kura/src/split_mix.rs, so that a driver
// shuffles or draws keys exactly as `kura bench` and the Rust drivers do.

#ifndef KURA_BENCH_SPLIT_MIX_H_
#define KURA_BENCH_SPLIT_MIX_H_

#include <cstdint>

class SplitMix64 {
 public:
  explicit constexpr SplitMix64(uint64_t seed) : state_(seed) {}
  constexpr uint64_t Next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // A number in [0, bound): multiply-shift, as the Rust side does.
  constexpr uint64_t Below(uint64_t bound) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(Next()) * bound) >> 64);
  }

 private:
  uint64_t state_;
};

// The first two outputs for seed 0 of the reference C implementation (Vigna's splitmix64.c),
// which crates/kura/src/split_mix.rs's test checks too: a driver whose generator drifted
// from the Rust one does not compile.
constexpr bool MatchesTheReferenceSequence() {
  SplitMix64 rng(0);
  return rng.Next() == 0xe220a8397b1dcdafULL && rng.Next() == 0x6e789e6aa1b965f4ULL;
}
static_assert(MatchesTheReferenceSequence(), "SplitMix64 must match crates/kura/src/split_mix.rs");

#endif  // KURA_BENCH_SPLIT_MIX_H_
