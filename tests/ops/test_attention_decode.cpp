// The decode attention op against the dense reference of the training mask: the last token's
// query slots of a full sequence see exactly what a cache of the current document (persistent
// rows, the last w windowed rows in any ring order, ω) plus the step's own keys gives them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gradcheck.h"
#include "ops/attention_reference.h"
#include "ops/cpu/attention_variants.h"
#include "ops/decode_cache_fixture.h"
#include "ops/decode_keys.h"
#include "ops/ops.h"
#include "util/float_formats.h"

namespace sps {
namespace {

using testing::max_relative_error;
using testing::random_vector;

struct DecodeCase {
  int64_t streams = 2, persistent_stream = 0, window = 3, omega = -1;
  int64_t heads = 2, head_dim = 8;
  std::vector<int64_t> tokens;      // per sequence: its length T_b (the query is token T_b − 1)
  std::vector<int64_t> doc_starts;  // per sequence: first token of the query's document
  int64_t capacity_slack = 5;       // unused capacity rows, filled with NaN
};

template <typename T>
void check_decode(const DecodeCase& c, uint64_t seed, double tolerance) {
  const int64_t B = int64_t(c.tokens.size()), H = c.heads, D = c.head_dim, HD = H * D;
  const int64_t Q = c.streams;
  const int64_t window_stream = 1 - c.persistent_stream;
  int64_t max_tokens = 0;
  for (int64_t t : c.tokens) max_tokens = std::max(max_tokens, t);
  const int64_t Cp = max_tokens + c.capacity_slack;
  const int64_t Cr = Q == 2 && c.window > 0 ? std::min(c.window, max_tokens) + 1 : 0;
  const T nan = std::numeric_limits<T>::quiet_NaN();
  std::vector<T> pk(B * H * Cp * D, nan), pv(pk.size(), nan);
  std::vector<T> rk(std::max<int64_t>(1, B * H * Cr * D), nan), rv(rk.size(), nan);
  std::vector<int64_t> p_begin(B), p_end(B), ring_len(B);  // p_begin: for counting pairs
  std::vector<T> step_qkv(B * Q * 3 * HD);
  std::vector<std::vector<double>> expected(B);
  std::mt19937_64 shuffle_rng(seed);

  for (int64_t b = 0; b < B; ++b) {
    const int64_t Tb = c.tokens[b], i = Tb - 1, start = c.doc_starts[b];
    ops::AttentionLayout layout;
    layout.batch = 1;
    layout.tokens = Tb;
    layout.streams = c.streams;
    layout.persistent_stream = c.persistent_stream;
    layout.window = c.window;
    layout.persistent_key_window = c.omega;
    layout.heads = H;
    layout.head_dim = D;
    std::vector<int32_t> doc(Tb), doc_start(Tb);
    for (int64_t t = 0; t < Tb; ++t) {
      doc[t] = t < start ? 0 : 1;
      doc_start[t] = t < start ? 0 : int32_t(start);
    }
    layout.doc = doc.data();
    layout.doc_start = doc_start.data();
    const int64_t S = c.streams * Tb;
    // Values exactly representable in T, so both sides see the same inputs.
    std::vector<double> qkv = random_vector(S * 3 * HD, seed + 17 * b);
    for (double& x : qkv) x = double(T(x));
    std::vector<double> out, lse;
    testing::reference_attention_forward(out, lse, qkv, layout);
    for (int64_t a = 0; a < Q; ++a)
      expected[b].insert(expected[b].end(), out.begin() + (a * Tb + i) * HD,
                         out.begin() + (a * Tb + i + 1) * HD);
    auto slot_row = [&](int64_t stream, int64_t token) { return &qkv[(stream * Tb + token) * 3 * HD]; };
    // The cache of the current document before token i.
    const int64_t persistent_stream = Q == 2 ? c.persistent_stream : 0;
    for (int64_t t = start; t < i; ++t)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t d = 0; d < D; ++d) {
          const int64_t row = ((b * H + h) * Cp + (t - start)) * D + d;
          pk[row] = T(slot_row(persistent_stream, t)[HD + h * D + d]);
          pv[row] = T(slot_row(persistent_stream, t)[2 * HD + h * D + d]);
        }
    p_end[b] = i - start;
    p_begin[b] = c.omega >= 0 ? std::max<int64_t>(0, p_end[b] - c.omega) : 0;
    std::vector<int64_t> ring_tokens;
    if (Cr > 0)
      for (int64_t t = std::max(start, i - c.window); t < i; ++t) ring_tokens.push_back(t);
    std::shuffle(ring_tokens.begin(), ring_tokens.end(), shuffle_rng);
    ring_len[b] = int64_t(ring_tokens.size());
    for (int64_t k = 0; k < ring_len[b]; ++k)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t d = 0; d < D; ++d) {
          const int64_t row = ((b * H + h) * Cr + k) * D + d;
          rk[row] = T(slot_row(window_stream, ring_tokens[k])[HD + h * D + d]);
          rv[row] = T(slot_row(window_stream, ring_tokens[k])[2 * HD + h * D + d]);
        }
    for (int64_t a = 0; a < Q; ++a)
      for (int64_t k = 0; k < 3 * HD; ++k) step_qkv[(b * Q + a) * 3 * HD + k] = T(slot_row(a, i)[k]);
  }

  ops::DecodeAttentionLayout layout;
  layout.batch = B;
  layout.queries = Q;
  layout.heads = H;
  layout.head_dim = D;
  layout.persistent_stream = c.persistent_stream;
  layout.window = c.window;
  layout.persistent_key_window = c.omega;
  layout.persistent_capacity = Cp;
  layout.ring_capacity = Cr;
  layout.persistent_end = p_end.data();
  layout.ring_len = ring_len.data();
  std::vector<T> out(B * Q * HD, nan);
  ops::attention_decode(out.data(), step_qkv.data(), pk.data(), pv.data(), Cr ? rk.data() : nullptr,
                        Cr ? rv.data() : nullptr, layout);
  const int64_t pairs = ops::decode_attention_pairs(layout);
  int64_t keys = 0;
  for (int64_t b = 0; b < B; ++b) keys += p_end[b] - p_begin[b] + ring_len[b];
  EXPECT_EQ(pairs, H * (Q * keys + B * Q * (Q + 1) / 2));
  for (int64_t b = 0; b < B; ++b)
    EXPECT_LT(max_relative_error(out.data() + b * Q * HD, expected[b].data(), Q * HD), tolerance)
        << "sequence " << b;
}

struct Family {
  const char* name;
  int64_t streams, persistent_stream;
};
const Family kFamilies[] = {{"standard", 1, 0}, {"sps", 2, 0}, {"predict_persistent", 2, 1}};

TEST(AttentionDecode, EqualsTheTrainingMaskForEveryFamilyWindowAndOmega) {
  uint64_t seed = 1;
  for (const Family& f : kFamilies)
    for (int64_t w : {0, 1, 3, 200})
      for (int64_t omega : {-1, 0, 2}) {
        DecodeCase c;
        c.streams = f.streams;
        c.persistent_stream = f.persistent_stream;
        c.window = w;
        c.omega = omega;
        // A fresh document (one token), a document started mid-sequence, one from token 0,
        // and a long one that spans several key chunks.
        c.tokens = {9, 11, 1, 150};
        c.doc_starts = {8, 4, 0, 0};
        SCOPED_TRACE(std::string(f.name) + " w=" + std::to_string(w) + " omega=" + std::to_string(omega));
        check_decode<double>(c, seed, 1e-12);
        check_decode<float>(c, seed, 2e-6);
        ++seed;
      }
}

TEST(AttentionDecode, HeadSizesAndManyHeads) {
  for (int64_t D : {2, 6, 64, 80}) {
    DecodeCase c;
    c.head_dim = D;
    c.heads = 5;
    c.tokens = {70, 3};
    c.doc_starts = {2, 0};
    SCOPED_TRACE("D=" + std::to_string(D));
    check_decode<float>(c, 100 + uint64_t(D), 2e-6);
  }
}

// Large scores: the online softmax must rescale across chunks without overflow.
TEST(AttentionDecode, LargeScoresStayFinite) {
  const int64_t H = 1, D = 4, Cp = 130, Q = 2;
  std::vector<float> pk(Cp * D), pv(Cp * D), qkv(Q * 3 * H * D, 0.0f);
  for (int64_t k = 0; k < Cp; ++k)
    for (int64_t d = 0; d < D; ++d) {
      pk[k * D + d] = float(k) * 3.0f;  // scores grow by chunk
      pv[k * D + d] = float(k);
    }
  for (int64_t d = 0; d < D; ++d) qkv[d] = qkv[3 * H * D + d] = 10.0f;
  const int64_t end = Cp;
  ops::DecodeAttentionLayout layout;
  layout.batch = 1;
  layout.queries = Q;
  layout.heads = H;
  layout.head_dim = D;
  layout.persistent_capacity = Cp;
  layout.persistent_end = &end;
  std::vector<float> out(Q * H * D);
  ops::attention_decode<float>(out.data(), qkv.data(), pk.data(), pv.data(), nullptr, nullptr, layout);
  // The last cached key dominates completely.
  for (float v : out) EXPECT_NEAR(v, float(Cp - 1), 1e-3);
}

// Over a bf16 cache (--kv-type bf16) the op equals attention_decode over the same rows widened
// to T, bit for bit: every family's cache shape, a step (K = 1), a short extend and one of
// enough rows to run as query tiles (which widen a chunk of rows before multiplying).
template <typename T>
void check_bf16_cache(const testing::DecodeCacheCase& c) {
  testing::DecodeCache x = testing::make_decode_cache(c);
  const auto rounded = [](const std::vector<float>& rows, std::vector<uint16_t>& bits,
                          std::vector<T>& wide) {
    for (const float v : rows) {
      bits.push_back(float_to_bf16(v));
      wide.push_back(T(bf16_to_float(bits.back())));
    }
  };
  std::vector<uint16_t> pk, pv, rk, rv;
  std::vector<T> wpk, wpv, wrk, wrv;
  rounded(x.pk, pk, wpk);
  rounded(x.pv, pv, wpv);
  rounded(x.rk, rk, wrk);
  rounded(x.rv, rv, wrv);
  const bool ring = c.ring_capacity > 0;
  for (const int64_t K : {int64_t(1), int64_t(3), int64_t(16)}) {
    ops::DecodeAttentionLayout layout = x.layout;
    layout.tokens = K;
    const int64_t rows = layout.batch * K * c.queries, HD = layout.heads * c.head_dim;
    std::vector<double> qkv_values = testing::random_vector(rows * 3 * HD, uint64_t(40 + K));
    const std::vector<T> qkv(qkv_values.begin(), qkv_values.end());
    std::vector<T> expected(rows * HD), out(rows * HD);
    ops::attention_decode<T>(expected.data(), qkv.data(), wpk.data(), wpv.data(),
                             ring ? wrk.data() : nullptr, ring ? wrv.data() : nullptr, layout);
    ops::attention_decode_bf16_cache<T>(out.data(), qkv.data(), pk.data(), pv.data(),
                                        ring ? rk.data() : nullptr, ring ? rv.data() : nullptr,
                                        layout);
    int64_t differ = 0;
    for (int64_t i = 0; i < rows * HD; ++i) differ += std::isnan(out[i]) || out[i] != expected[i];
    EXPECT_EQ(differ, 0) << "K = " << K;
  }
}

TEST(AttentionDecode, Bf16CacheEqualsTheWidenedRows) {
  for (const testing::DecodeCacheCase& c : testing::decode_cache_cases()) {
    SCOPED_TRACE(testing::name(c));
    check_bf16_cache<float>(c);
    check_bf16_cache<double>(c);
  }
}

// Every build of the decode attention this CPU runs (attention_variants.h) gives the baseline
// build's bits, over a T cache and a bf16 one, for a step, a short extend and one that runs as
// query tiles: every family's cache shape, and head sizes whose vector tails differ between
// the widths. Flipping the halves of a 512-bit key pair, or summing a chunk's softmax in
// 512-bit lanes, fails it.
template <typename T>
void compare_decode_variant_bits(const ops::AttentionKernels<T>& variant,
                                 const testing::DecodeCacheCase& c) {
  const ops::AttentionKernels<T>& baseline = ops::baseline::attention_kernels<T>();
  const testing::DecodeCache x = testing::make_decode_cache(c);
  const auto wide = [](const std::vector<float>& v) { return std::vector<T>(v.begin(), v.end()); };
  const auto bf16 = [](const std::vector<float>& v) {
    std::vector<uint16_t> bits;
    for (const float f : v) bits.push_back(float_to_bf16(f));
    return bits;
  };
  const std::vector<T> pk = wide(x.pk), pv = wide(x.pv), rk = wide(x.rk), rv = wide(x.rv);
  const std::vector<uint16_t> bpk = bf16(x.pk), bpv = bf16(x.pv), brk = bf16(x.rk),
                              brv = bf16(x.rv);
  const bool ring = c.ring_capacity > 0;
  for (const int64_t K : {int64_t(1), int64_t(3), int64_t(16)}) {
    ops::DecodeAttentionLayout layout = x.layout;
    layout.tokens = K;
    const int64_t rows = layout.batch * K * c.queries, HD = layout.heads * c.head_dim;
    const std::vector<T> qkv =
        testing::cast_vector<T>(random_vector(rows * 3 * HD, uint64_t(60 + K)));
    for (const bool bf16_cache : {false, true}) {
      std::vector<T> out[2];
      for (int run = 0; run < 2; ++run) {
        const ops::AttentionKernels<T>& k = run == 0 ? baseline : variant;
        out[run].assign(rows * HD, T(0));
        if (bf16_cache)
          k.decode_bf16_cache(out[run].data(), qkv.data(), bpk.data(), bpv.data(),
                              ring ? brk.data() : nullptr, ring ? brv.data() : nullptr, layout);
        else
          k.decode(out[run].data(), qkv.data(), pk.data(), pv.data(), ring ? rk.data() : nullptr,
                   ring ? rv.data() : nullptr, layout);
      }
      int64_t differ = 0;
      for (int64_t i = 0; i < rows * HD; ++i)
        differ += std::memcmp(&out[0][i], &out[1][i], sizeof(T)) != 0;
      EXPECT_EQ(differ, 0) << variant.variant << " in " << sizeof(T) * 8 << "-bit, K = " << K
                           << (bf16_cache ? ", bf16 cache" : ", T cache");
    }
  }
}

TEST(AttentionVariants, DecodeGivesTheBaselineBits) {
  const auto variants = ops::runnable_attention_variants<float>();
  if (variants.size() < 2)
    GTEST_SKIP() << "this build or CPU runs no build of the attention but the baseline "
                    "(the AVX-512 one needs a portable optimised build on an AVX-512 CPU)";
  std::vector<testing::DecodeCacheCase> cases = testing::decode_cache_cases();
  for (const int64_t D : {12, 24, 72}) {  // the vector tails of each width
    testing::DecodeCacheCase c = cases[3];  // 300 cached rows: whole groups, pairs, one key
    c.head_dim = D;
    cases.push_back(c);
  }
  for (size_t v = 1; v < variants.size(); ++v)
    for (const testing::DecodeCacheCase& c : cases) {
      SCOPED_TRACE(testing::name(c));
      compare_decode_variant_bits<float>(*variants[v], c);
      compare_decode_variant_bits<double>(*ops::runnable_attention_variants<double>()[v], c);
    }
}

// Rows into bf16: each value rounded as float_to_bf16 (ties to even, signed zeros,
// infinities, NaN), at the rows the offsets name.
TEST(CopyRows, IntoBf16RoundsEachValue) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> src = {1.00390625f, 1.01171875f, -0.0f, 0.0f, inf, -inf,
                                  std::numeric_limits<float>::quiet_NaN(), 1e-40f,
                                  3.4e38f, -2.5f, 0.1f, 65504.0f};
  const int64_t to[] = {6, 0}, from[] = {0, 6};
  std::vector<uint16_t> dst(12, 0xAAAA);
  ops::copy_rows_to_bf16(dst.data(), src.data(), to, from, 2, 6);
  for (int64_t j = 0; j < 6; ++j) {
    EXPECT_EQ(dst[6 + j], float_to_bf16(src[j])) << j;
    EXPECT_EQ(dst[j], float_to_bf16(src[6 + j])) << j;
  }
  EXPECT_EQ(dst[6], 0x3F80);  // 1 + 2^-8 lies halfway: to the even neighbour, 1.0
  EXPECT_EQ(dst[7], 0x3F82);  // 1 + 3·2^-8 lies halfway: to the even neighbour, 1 + 2^-6
}

}  // namespace
}  // namespace sps
