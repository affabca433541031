#pragma once
// Decode-attention inputs for testing a device's kernels against the CPU backend: random
// caches of every family's shape (persistent rows within ω, a ring not yet full or full in
// any rotation; unused rows NaN, so a read of one shows), a step's query rows, and what the
// CPU backend computes from them in double.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ops/ops.h"

namespace sps::testing {

struct DecodeCacheCase {
  int64_t queries, persistent_stream, window, omega, head_dim;
  std::vector<int64_t> persistent_end, ring_len, ring_next;  // per sequence
  int64_t ring_capacity;
};

inline std::string name(const DecodeCacheCase& c) {
  return "Q " + std::to_string(c.queries) + ", persistent " + std::to_string(c.persistent_stream) +
         ", w " + std::to_string(c.window) + ", omega " + std::to_string(c.omega) + ", D " +
         std::to_string(c.head_dim) + ", ring " + std::to_string(c.ring_capacity);
}

// Reachable ring states only: a ring not yet full holds rows [0, len) (next = len), a full
// one any rotation. Sequences with no cached row, with more rows than a split, ω and w
// below the rows cached, heads of 16, 40 and 64.
inline std::vector<DecodeCacheCase> decode_cache_cases() {
  const std::vector<int64_t> ends = {0, 5, 40}, lens = {0, 2, 4}, nexts = {0, 2, 1};
  return {{2, 0, 3, -1, 16, ends, lens, nexts, 4},  // sps
          {2, 1, 3, -1, 16, ends, lens, nexts, 4},  // predict-persistent
          {1, 0, 0, -1, 16, ends, {}, {}, 0},       // standard
          {2, 0, 3, 4, 64, {10, 2, 300}, {4, 3, 1}, {2, 3, 1}, 4},
          {2, 0, 2, -1, 40, {300, 1}, {6, 1}, {5, 1}, 6},  // w below the ring's rows
          {1, 0, 0, 0, 64, {7, 0}, {}, {}, 0}};            // ω = 0
}

struct DecodeCache {
  std::vector<float> pk, pv, rk, rv, qkv;  // layouts of ops.h attention_decode
  std::vector<int64_t> persistent_end, ring_len, ring_next;
  ops::DecodeAttentionLayout layout;  // 2 heads; its arrays point into this object
  std::vector<double> expected;       // the CPU backend's output, in double
};

inline DecodeCache make_decode_cache(const DecodeCacheCase& c) {
  const int64_t B = int64_t(c.persistent_end.size()), H = 2, D = c.head_dim, HD = H * D;
  const int64_t Q = c.queries, Cr = c.ring_capacity;
  const int64_t Cp = *std::max_element(c.persistent_end.begin(), c.persistent_end.end()) + 3;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal;
  DecodeCache x;
  x.pk.assign(B * H * Cp * D, nan);
  x.pv.assign(x.pk.size(), nan);
  x.rk.assign(std::max<int64_t>(1, B * H * Cr * D), nan);
  x.rv.assign(x.rk.size(), nan);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t row = 0; row < c.persistent_end[b]; ++row)
        for (int64_t e = 0; e < D; ++e) {
          x.pk[((b * H + h) * Cp + row) * D + e] = normal(rng);
          x.pv[((b * H + h) * Cp + row) * D + e] = normal(rng);
        }
      for (int64_t k = 0; Cr > 0 && k < c.ring_len[b]; ++k) {
        const int64_t row = ((c.ring_next[b] - 1 - k) % Cr + Cr) % Cr;
        for (int64_t e = 0; e < D; ++e) {
          x.rk[((b * H + h) * Cr + row) * D + e] = normal(rng);
          x.rv[((b * H + h) * Cr + row) * D + e] = normal(rng);
        }
      }
    }
  x.qkv.resize(B * Q * 3 * HD);
  for (float& v : x.qkv) v = normal(rng);
  x.persistent_end = c.persistent_end;
  x.ring_len = c.ring_len;
  x.ring_next = c.ring_next;
  ops::DecodeAttentionLayout& l = x.layout;
  l.batch = B;
  l.queries = Q;
  l.heads = H;
  l.head_dim = D;
  l.persistent_stream = c.persistent_stream;
  l.window = c.window;
  l.persistent_key_window = c.omega;
  l.persistent_capacity = Cp;
  l.ring_capacity = Cr;
  l.persistent_end = x.persistent_end.data();
  l.ring_len = Cr > 0 ? x.ring_len.data() : nullptr;
  l.ring_next = Cr > 0 ? x.ring_next.data() : nullptr;
  const auto wide = [](const std::vector<float>& v) {
    return std::vector<double>(v.begin(), v.end());
  };
  x.expected.resize(B * Q * HD);
  ops::attention_decode<double>(x.expected.data(), wide(x.qkv).data(), wide(x.pk).data(),
                                wide(x.pv).data(), wide(x.rk).data(), wide(x.rv).data(), l);
  return x;
}

}  // namespace sps::testing
