#include "data/sampler.h"

#include <algorithm>
#include <bit>

#include "util/error.h"

namespace sps {

namespace {

// MT19937 as CPython's random module runs it.
class Mt19937 {
 public:
  explicit Mt19937(const std::vector<uint32_t>& key) {
    init(19650218u);
    uint32_t i = 1, j = 0;
    const uint32_t length = uint32_t(key.size());
    for (uint32_t k = std::max<uint32_t>(kN, length); k > 0; --k) {
      state_[i] = (state_[i] ^ ((state_[i - 1] ^ (state_[i - 1] >> 30)) * 1664525u)) + key[j] + j;
      ++i;
      ++j;
      if (i >= kN) {
        state_[0] = state_[kN - 1];
        i = 1;
      }
      if (j >= length) j = 0;
    }
    for (uint32_t k = kN - 1; k > 0; --k) {
      state_[i] = (state_[i] ^ ((state_[i - 1] ^ (state_[i - 1] >> 30)) * 1566083941u)) - i;
      ++i;
      if (i >= kN) {
        state_[0] = state_[kN - 1];
        i = 1;
      }
    }
    state_[0] = 0x80000000u;
    index_ = kN;
  }

  uint32_t next() {
    if (index_ >= kN) twist();
    uint32_t y = state_[index_++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
  }

  // Uniform in [0, n), n in [1, 2^32): CPython's _randbelow_with_getrandbits.
  uint32_t below(uint64_t n) {
    const int bits = std::bit_width(n);
    uint64_t r;
    do r = next() >> (32 - bits); while (r >= n);
    return uint32_t(r);
  }

 private:
  static constexpr uint32_t kN = 624, kM = 397;
  void init(uint32_t seed) {
    state_[0] = seed;
    for (uint32_t i = 1; i < kN; ++i)
      state_[i] = 1812433253u * (state_[i - 1] ^ (state_[i - 1] >> 30)) + i;
  }
  void twist() {
    for (uint32_t i = 0; i < kN; ++i) {
      const uint32_t y = (state_[i] & 0x80000000u) | (state_[(i + 1) % kN] & 0x7fffffffu);
      state_[i] = state_[(i + kM) % kN] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
    }
    index_ = 0;
  }
  uint32_t state_[kN];
  uint32_t index_ = kN;
};

}  // namespace

std::vector<int64_t> python_shuffled_range(int64_t n, uint64_t seed) {
  SPS_ASSERT(n >= 0 && n < (int64_t(1) << 32));
  std::vector<uint32_t> key{uint32_t(seed)};
  if (seed >> 32) key.push_back(uint32_t(seed >> 32));
  Mt19937 rng(key);
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  for (int64_t i = n - 1; i >= 1; --i) std::swap(order[i], order[rng.below(uint64_t(i + 1))]);
  return order;
}

SamplerType sampler_type_from_name(const std::string& name, const std::string& field) {
  if (name == "fixed_random_chunk") return SamplerType::fixed_random_chunk;
  if (name == "sequential") return SamplerType::sequential;
  fail("{}: expected fixed_random_chunk or sequential, got '{}'", field, name);
}

const char* sampler_type_name(SamplerType type) {
  return type == SamplerType::fixed_random_chunk ? "fixed_random_chunk" : "sequential";
}

WindowSampler::WindowSampler(int64_t file_tokens, const SamplerConfig& config,
                             const std::string& source)
    : config_(config) {
  const int64_t T = config.block_size;
  SPS_ASSERT(T > 0 && config.ranks >= 1 && config.rank >= 0 && config.rank < config.ranks);
  SPS_ASSERT(config.chunk_size_units > 0 && config.start_offset >= 0);
  const int64_t starts = file_tokens - T;  // window starts p with p + T + 1 <= N
  if (starts < 1)
    fail("{}: {} tokens, fewer than one window of block_size + 1 = {} tokens", source,
         file_tokens, T + 1);
  start_offset_ = config.start_offset % starts;
  units_ = (starts - start_offset_ + T - 1) / T;
  const int64_t R = config.ranks, r = config.rank;
  if (config.type == SamplerType::sequential) {
    rank_units_ = units_ > r ? (units_ - r + R - 1) / R : 0;
  } else {
    const int64_t C = config.chunk_size_units;
    const int64_t chunks = (units_ + C - 1) / C;
    const std::vector<int64_t> order = python_shuffled_range(chunks, config.shuffle_seed);
    chunk_prefix_.push_back(0);
    for (int64_t k = r; k < chunks; k += R) {
      const int64_t begin = order[k] * C, end = std::min(units_, begin + C);
      chunk_start_.push_back(begin);
      chunk_prefix_.push_back(chunk_prefix_.back() + (end - begin));
    }
    rank_units_ = chunk_prefix_.back();
  }
  if (rank_units_ == 0)
    fail("{}: {} windows of {} tokens cannot give each of {} ranks a window{}", source, units_,
         T, R,
         config.type == SamplerType::fixed_random_chunk
             ? " (chunks of training.chunk_size_units windows go to ranks whole)"
             : "");
}

int64_t WindowSampler::position(int64_t index) const {
  SPS_ASSERT(index >= 0);
  const int64_t i = index % rank_units_;
  int64_t unit;
  if (config_.type == SamplerType::sequential) {
    unit = config_.rank + i * config_.ranks;
  } else {
    // The chunk holding window i: the last prefix <= i.
    const size_t c = size_t(std::upper_bound(chunk_prefix_.begin(), chunk_prefix_.end(), i) -
                            chunk_prefix_.begin()) - 1;
    unit = chunk_start_[c] + (i - chunk_prefix_[c]);
  }
  return start_offset_ + unit * config_.block_size;
}

}  // namespace sps
