#pragma once
// Which windows of train.bin each rank trains on (docs/model.md §6). A window at position p is
// x = data[p, p+T), y = data[p+1, p+T+1]. Windows start at s + u·T for units
// u = 0 … U−1, U = ⌈(N − T − s)/T⌉ (N tokens in the file, s the start offset).
//
// fixed_random_chunk: units are grouped into chunks of `chunk_size_units`; the chunk order
//   is shuffled once with `shuffle_seed` — the permutation Python's
//   random.Random(seed).shuffle(list(range(chunks))) gives, so the paper's data order is
//   reproduced — and rank r of R takes the shuffled chunks r, r+R, r+2R, …, reading the
//   units inside a chunk in order.
// sequential: units in order; rank r takes units r, r+R, r+2R, ….
//
// A rank's windows form a fixed list; window k of the run is entry k mod length (after a
// full pass the same order starts again), so resuming after k windows is just index k.
#include <cstdint>
#include <string>
#include <vector>

namespace sps {

enum class SamplerType { fixed_random_chunk, sequential };

// "fixed_random_chunk" | "sequential"; anything else is a UserError naming `field`.
SamplerType sampler_type_from_name(const std::string& name, const std::string& field);
const char* sampler_type_name(SamplerType type);

struct SamplerConfig {
  SamplerType type = SamplerType::fixed_random_chunk;
  int64_t block_size = 0;              // T
  int64_t chunk_size_units = 262144;   // windows per chunk
  uint64_t shuffle_seed = 1337;
  int64_t start_offset = 0;            // s (taken modulo N − T)
  int rank = 0, ranks = 1;
};

class WindowSampler {
 public:
  // `file_tokens` = N. A file too short for one window per rank is a UserError naming
  // `source`.
  WindowSampler(int64_t file_tokens, const SamplerConfig& config, const std::string& source);

  int64_t units() const { return units_; }            // windows in the file, all ranks
  int64_t rank_units() const { return rank_units_; }  // this rank's windows per pass
  int64_t start_offset() const { return start_offset_; }
  // Start position of this rank's window number `index` (0-based, ≥ 0).
  int64_t position(int64_t index) const;

 private:
  SamplerConfig config_;
  int64_t start_offset_ = 0, units_ = 0, rank_units_ = 0;
  std::vector<int64_t> chunk_start_;   // fixed_random_chunk: this rank's chunks, in order
  std::vector<int64_t> chunk_prefix_;  // windows before each chunk of this rank
};

// The permutation of 0 … n−1 that CPython's random.Random(seed).shuffle produces
// (MT19937 seeded by init_by_array with the seed's 32-bit words, _randbelow by rejection
// on getrandbits). n < 2^32.
std::vector<int64_t> python_shuffled_range(int64_t n, uint64_t seed);

}  // namespace sps
