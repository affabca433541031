// The CPU family-masked attention against the dense reference (attention_reference.h), the
// visibility facts of docs/model.md §4, finite differences, and the pair count of the tiling rule.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "gradcheck.h"
#include "ops/attention_reference.h"
#include "ops/cpu/attention_tiles.h"
#include "ops/cpu/attention_variants.h"
#include "ops/ops.h"
#include "util/alloc_counter.h"

namespace sps {
namespace {

using ops::AttentionLayout;
using testing::document_starts;
using testing::max_relative_error;
using testing::random_documents;
using testing::random_vector;

// A layout with its own document arrays (the layout points into them).
struct AttentionCase {
  AttentionLayout layout;
  std::vector<int32_t> doc, doc_start;  // [B, T]
  bool use_doc = true;

  AttentionLayout bound() const {
    AttentionLayout l = layout;
    l.doc = use_doc ? doc.data() : nullptr;
    l.doc_start = use_doc ? doc_start.data() : nullptr;
    return l;
  }
  int64_t slots() const { return layout.batch * layout.streams * layout.tokens; }
  int64_t qkv_size() const { return slots() * 3 * layout.heads * layout.head_dim; }
  int64_t out_size() const { return slots() * layout.heads * layout.head_dim; }
  std::string describe() const {
    const AttentionLayout& l = layout;
    return "B=" + std::to_string(l.batch) + " T=" + std::to_string(l.tokens) +
           " streams=" + std::to_string(l.streams) +
           " persistent=" + std::to_string(l.persistent_stream) + " w=" + std::to_string(l.window) +
           " omega=" + std::to_string(l.persistent_key_window) + " H=" + std::to_string(l.heads) +
           " D=" + std::to_string(l.head_dim) + (use_doc ? " docs" : " no-docs");
  }
};

AttentionCase make_case(int64_t B, int64_t T, int64_t streams, int64_t persistent, int64_t window,
                        int64_t omega, int64_t H, int64_t D, uint64_t seed) {
  std::mt19937_64 rng(seed);
  AttentionCase c;
  c.layout.batch = B;
  c.layout.tokens = T;
  c.layout.streams = streams;
  c.layout.persistent_stream = persistent;
  c.layout.window = window;
  c.layout.persistent_key_window = omega;
  c.layout.heads = H;
  c.layout.head_dim = D;
  const int pads = int(rng() % 3), boundaries = int(rng() % 5) * 2;
  c.doc = random_documents(B, T, pads, boundaries, rng);
  c.doc_start = document_starts(c.doc, B, T);
  c.use_doc = rng() % 5 != 0;
  return c;
}

// The cases the kernel is compared on: windows 0, 1, 3, ≥ T, both persistent streams, ω on
// and off, streams 1 and 2, T below, at and above a tile and beyond a key chunk, B, H > 1,
// head dims that are and are not multiples of the vector width.
std::vector<AttentionCase> comparison_cases() {
  std::vector<AttentionCase> cases;
  const int64_t token_choices[] = {1, 2, 5, 17, 63, 64, 65, 100, 130, 150};
  const int64_t dim_choices[] = {5, 8, 16, 24, 64};
  uint64_t seed = 1;
  auto add = [&](int64_t streams, int64_t persistent, int64_t window_kind, int64_t omega) {
    std::mt19937_64 rng(seed * 7919);
    const int64_t T = token_choices[rng() % 10];
    const int64_t window = window_kind >= 0 ? window_kind : T + int64_t(rng() % 3);
    const int64_t D = dim_choices[rng() % 5];
    int64_t H = 1 + int64_t(rng() % 3), B = 1 + int64_t(rng() % 2);
    if (T * T * H * B * D > 600000) H = 1;  // keeps the dense reference quick
    cases.push_back(make_case(B, T, streams, persistent, window, omega, H, D, seed++));
  };
  for (int64_t persistent : {0, 1})
    for (int64_t window : {0, 1, 3, -1})
      for (int64_t omega : {-1, 5}) add(2, persistent, window, omega);
  for (int64_t omega : {-1, -1, 0, 5}) add(1, 0, 0, omega);
  // Several key chunks per range, and a multi-tile windowed range.
  cases.push_back(make_case(1, 300, 2, 0, 3, -1, 1, 8, 101));
  cases.push_back(make_case(1, 260, 2, 1, 200, 150, 1, 16, 102));
  cases.push_back(make_case(2, 200, 1, 0, 0, -1, 2, 8, 103));
  // Key ranges of several chunks whose first chunk is causally whole but reaches past the
  // window (w) or the persistent window (ω), in one document.
  for (int64_t persistent : {0, 1}) {
    AttentionCase c = make_case(1, 300, 2, persistent, 150, 140, 2, 16, 105);  // threaded
    c.use_doc = false;
    cases.push_back(c);
  }
  // Whole key chunks far behind a tile whose last queries start a new document: the chunk
  // is inside every causal and window bound, and still must be masked.
  for (int64_t streams : {1, 2}) {
    AttentionCase c = make_case(1, 300, streams, 0, 500, -1, 1, 8, 104);
    const int64_t boundary = streams == 1 ? 270 : 299;  // 299: the tile's last query alone
    for (int64_t i = 0; i < 300; ++i) c.doc[i] = i < boundary ? 4 : 9;
    c.doc_start = document_starts(c.doc, 1, 300);
    c.use_doc = true;
    cases.push_back(c);
  }
  return cases;
}

struct Result {
  std::vector<double> out, lse, dqkv;
  int64_t pairs = 0;
};

// Runs the kernel in precision T on the double data; dqkv starts as NaN so that any entry
// the backward forgets to write shows up.
template <typename T>
Result run_kernel(const AttentionCase& c, const std::vector<double>& qkv,
                  const std::vector<double>& dout) {
  const AttentionLayout layout = c.bound();
  const std::vector<T> qkv_t = testing::cast_vector<T>(qkv), dout_t = testing::cast_vector<T>(dout);
  std::vector<T> out(c.out_size()), lse(c.slots() * c.layout.heads);
  std::vector<T> dqkv(c.qkv_size(), std::numeric_limits<T>::quiet_NaN());
  Result r;
  r.pairs = ops::attention_forward(out.data(), lse.data(), qkv_t.data(), layout);
  ops::attention_backward(dqkv.data(), dout_t.data(), qkv_t.data(), out.data(), lse.data(), layout);
  r.out.assign(out.begin(), out.end());
  r.lse.assign(lse.begin(), lse.end());
  r.dqkv.assign(dqkv.begin(), dqkv.end());
  return r;
}

bool all_finite(const std::vector<double>& v) {
  for (double x : v)
    if (!std::isfinite(x)) return false;
  return true;
}

template <typename T>
void compare_with_reference(double tolerance) {
  for (const AttentionCase& c : comparison_cases()) {
    SCOPED_TRACE(c.describe());
    const AttentionLayout layout = c.bound();
    const std::vector<double> qkv = random_vector(c.qkv_size(), 11 + c.layout.tokens, 1.5);
    const std::vector<double> dout = random_vector(c.out_size(), 12 + c.layout.tokens);
    std::vector<double> out, lse, dqkv;
    testing::reference_attention_forward(out, lse, qkv, layout);
    testing::reference_attention_backward(dqkv, dout, qkv, layout);
    const Result r = run_kernel<T>(c, qkv, dout);
    EXPECT_EQ(r.pairs, ops::attention_pair_count(layout));
    ASSERT_TRUE(all_finite(r.out));
    ASSERT_TRUE(all_finite(r.dqkv));
    EXPECT_LE(max_relative_error(r.out.data(), out.data(), int64_t(out.size())), tolerance);
    EXPECT_LE(max_relative_error(r.lse.data(), lse.data(), int64_t(lse.size())), tolerance);
    const int64_t hd = c.layout.heads * c.layout.head_dim;
    // dq, dk, dv separately: each part has its own scale.
    for (int part = 0; part < 3; ++part) {
      std::vector<double> got, want;
      for (int64_t s = 0; s < c.slots(); ++s)
        for (int64_t x = 0; x < hd; ++x) {
          got.push_back(r.dqkv[(s * 3 + part) * hd + x]);
          want.push_back(dqkv[(s * 3 + part) * hd + x]);
        }
      // The floor: when every query sees a single key, dq and dk are 0 analytically and only
      // the rounding of dP − Δ remains (≈1e-6 in float against gradients of order 1).
      const double floor = std::is_same_v<T, float> ? 1.0 : 1e-2;
      EXPECT_LE(max_relative_error(got.data(), want.data(), int64_t(got.size()), floor), tolerance)
          << "part "
          << "qkv"[part];
    }
  }
}

TEST(Attention, MatchesReferenceInDouble) { compare_with_reference<double>(1e-10); }

TEST(Attention, MatchesReferenceInFloat) { compare_with_reference<float>(1e-5); }

// The kernel's mask, read off exactly: with q = k = 0 every visible key gets the same weight,
// and with v one-hot per key slot, out[query, key] = 1/count exactly where the key is visible.
TEST(Attention, KernelMaskIsTheSpecMask) {
  for (int64_t persistent : {0, 1})
    for (int64_t window : {0, 2, 80}) {
      AttentionCase c =
          make_case(1, 70, 2, persistent, window, persistent ? 9 : -1, 1, 140, 40 + window);
      c.use_doc = true;
      SCOPED_TRACE(c.describe());
      const AttentionLayout layout = c.bound();
      const int64_t S = 140;
      std::vector<float> qkv(c.qkv_size(), 0.0f), out(c.out_size()), lse(S);
      for (int64_t s = 0; s < S; ++s) qkv[s * 3 * S + 2 * S + s] = 1.0f;  // v = one-hot
      ops::attention_forward(out.data(), lse.data(), qkv.data(), layout);
      const std::vector<char> mask = testing::reference_mask(layout, 0);
      for (int64_t qs = 0; qs < S; ++qs)
        for (int64_t ks = 0; ks < S; ++ks)
          ASSERT_EQ(out[qs * S + ks] > 0.0f, bool(mask[qs * S + ks]))
              << "query slot " << qs << " key slot " << ks;
    }
}

// Scratch is per thread and only grows: a second call with the same shapes allocates nothing.
TEST(Attention, SecondCallDoesNotAllocate) {
  const AttentionCase c = make_case(2, 200, 2, 0, 64, -1, 2, 32, 9);
  const AttentionLayout layout = c.bound();
  const std::vector<float> qkv = testing::cast_vector<float>(random_vector(c.qkv_size(), 1));
  const std::vector<float> dout = testing::cast_vector<float>(random_vector(c.out_size(), 2));
  std::vector<float> out(c.out_size()), lse(c.slots() * 2), dqkv(c.qkv_size());
  auto step = [&] {
    ops::attention_forward(out.data(), lse.data(), qkv.data(), layout);
    ops::attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), layout);
  };
  step();
  const int64_t before = allocation_count();
  step();
  EXPECT_EQ(allocation_count() - before, 0);
}

TEST(Attention, BackwardMatchesFiniteDifferences) {
  AttentionCase c = make_case(1, 6, 2, 0, 1, -1, 2, 4, 7);
  c.doc = {0, 0, 0, 1, 1, 1};
  c.doc_start = {0, 0, 0, 3, 3, 3};
  c.use_doc = true;
  const AttentionLayout layout = c.bound();
  std::vector<double> qkv = random_vector(c.qkv_size(), 21);
  const std::vector<double> weight = random_vector(c.out_size(), 22);
  std::vector<double> out(c.out_size()), lse(c.slots() * 2), dqkv(c.qkv_size());
  auto loss = [&] {
    ops::attention_forward(out.data(), lse.data(), qkv.data(), layout);
    double sum = 0;
    for (size_t x = 0; x < out.size(); ++x) sum += out[x] * weight[x];
    return sum;
  };
  const std::vector<double> numeric =
      testing::numeric_gradient(loss, qkv.data(), int64_t(qkv.size()));
  loss();
  ops::attention_backward(dqkv.data(), weight.data(), qkv.data(), out.data(), lse.data(), layout);
  EXPECT_LE(max_relative_error(dqkv.data(), numeric.data(), int64_t(dqkv.size())), 1e-7);
}

// Every build of the kernels this CPU runs (attention_variants.h) gives the baseline build's
// bits, forward and backward, in float and double: the choice between them changes speed only.
template <typename T>
void compare_variant_bits(const ops::AttentionKernels<T>& variant) {
  const ops::AttentionKernels<T>& baseline = ops::baseline::attention_kernels<T>();
  std::vector<AttentionCase> cases = comparison_cases();
  cases.push_back(make_case(2, 300, 2, 0, 64, -1, 3, 64, 106));  // the s head size, threaded
  for (int64_t D : {3, 8, 12, 24, 40, 72})  // the vector tails of each width
    cases.push_back(make_case(1, 130, 2, 0, 3, -1, 2, D, 107 + D));
  for (const AttentionCase& c : cases) {
    SCOPED_TRACE(c.describe());
    const AttentionLayout layout = c.bound();
    const std::vector<T> qkv = testing::cast_vector<T>(random_vector(c.qkv_size(), 31));
    const std::vector<T> dout = testing::cast_vector<T>(random_vector(c.out_size(), 32));
    std::vector<std::vector<T>> results;  // out, lse, dqkv of the baseline, then the variant's
    int64_t pairs[2];
    for (int run = 0; run < 2; ++run) {
      const ops::AttentionKernels<T>& k = run == 0 ? baseline : variant;
      std::vector<T> out(c.out_size()), lse(c.slots() * c.layout.heads), dqkv(c.qkv_size());
      pairs[run] = k.forward(out.data(), lse.data(), qkv.data(), layout);
      k.backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), layout);
      for (std::vector<T>* v : {&out, &lse, &dqkv}) results.push_back(*v);
    }
    EXPECT_EQ(pairs[1], pairs[0]);
    for (size_t i = 0; i < 3; ++i) {
      const std::vector<T>&a = results[i], &b = results[i + 3];
      const char* name = i == 0 ? "out" : i == 1 ? "lse" : "dqkv";
      ASSERT_EQ(a.size(), b.size());
      for (size_t x = 0; x < a.size(); ++x)
        ASSERT_EQ(std::memcmp(&a[x], &b[x], sizeof(T)), 0)
            << variant.variant << " in " << sizeof(T) * 8 << "-bit: " << name << "[" << x << "] "
            << a[x] << " vs " << b[x];
    }
  }
}

TEST(AttentionVariants, GiveTheBaselineBits) {
  const auto variants = ops::runnable_attention_variants<float>();
  if (variants.size() < 2)
    GTEST_SKIP() << "this build or CPU runs no build of the attention but the baseline "
                    "(the AVX-512 one needs a portable optimised build on an AVX-512 CPU)";
  for (size_t v = 1; v < variants.size(); ++v) {
    compare_variant_bits<float>(*variants[v]);
    if (HasFailure()) return;
    compare_variant_bits<double>(*ops::runnable_attention_variants<double>()[v]);
  }
}

// ---- docs/model.md §4 visibility facts, on the reference mask builder ------------------

AttentionLayout one_document(int64_t T, int64_t streams, int64_t persistent, int64_t window,
                             int64_t omega = -1) {
  return testing::mask_layout(1, T, streams, persistent, window, omega);
}

constexpr int64_t kInput = 0, kPredict = 1;

TEST(AttentionVisibility, SpsWindowZeroKeepsPredictSlotsPrivate) {
  const int64_t T = 12;
  const AttentionLayout l = one_document(T, 2, kInput, 0);
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j) {
      EXPECT_FALSE(testing::reference_visible(l, nullptr, kInput, i, kPredict, j));
      EXPECT_EQ(testing::reference_visible(l, nullptr, kPredict, i, kPredict, j), i == j);
    }
}

TEST(AttentionVisibility, SpsSlotsSeeTheirWindow) {
  const int64_t T = 20, w = 3;
  const AttentionLayout l = one_document(T, 2, kInput, w);
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j) {
      // x_i sees x_0..x_i and ρ_{i−w}..ρ_{i−1}; ρ_i sees x_0..x_i and ρ_{i−w}..ρ_i.
      EXPECT_EQ(testing::reference_visible(l, nullptr, kInput, i, kInput, j), j <= i);
      EXPECT_EQ(testing::reference_visible(l, nullptr, kInput, i, kPredict, j),
                i - w <= j && j <= i - 1);
      EXPECT_EQ(testing::reference_visible(l, nullptr, kPredict, i, kInput, j), j <= i);
      EXPECT_EQ(testing::reference_visible(l, nullptr, kPredict, i, kPredict, j),
                i - w <= j && j <= i);
    }
}

TEST(AttentionVisibility, ReverseSpsPersistsPredictSlots) {
  const int64_t T = 15, w = 2;
  const AttentionLayout l = one_document(T, 2, kPredict, w);
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j) {
      EXPECT_EQ(testing::reference_visible(l, nullptr, kInput, i, kPredict, j), j < i);
      EXPECT_EQ(testing::reference_visible(l, nullptr, kInput, i, kInput, j), i - w <= j && j <= i);
      EXPECT_EQ(testing::reference_visible(l, nullptr, kPredict, i, kPredict, j), j <= i);
    }
}

TEST(AttentionVisibility, PersistentWindowLimitsPersistentKeys) {
  const int64_t T = 16, omega = 4;
  const AttentionLayout l = one_document(T, 2, kInput, 64, omega);
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j) {
      EXPECT_EQ(testing::reference_visible(l, nullptr, kPredict, i, kInput, j),
                j <= i && i - j <= omega);
      EXPECT_EQ(testing::reference_visible(l, nullptr, kPredict, i, kPredict, j), j <= i);
    }
  const AttentionLayout standard = one_document(T, 1, kInput, 0, omega);
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j)
      EXPECT_EQ(testing::reference_visible(standard, nullptr, kInput, i, kInput, j),
                j <= i && i - j <= omega);
}

TEST(AttentionVisibility, EveryQuerySeesItselfAndOnlyItsDocument) {
  for (int trial = 0; trial < 20; ++trial) {
    const int64_t streams = 1 + trial % 2, persistent = streams == 2 ? trial % 4 / 2 : 0;
    const AttentionCase c =
        make_case(1, 40, streams, persistent, trial % 5, trial % 3 - 1, 1, 1, 300 + trial);
    const AttentionLayout l = c.bound();
    const int64_t S = l.streams * l.tokens;
    const std::vector<char> mask = testing::reference_mask(l, 0);
    for (int64_t qs = 0; qs < S; ++qs) {
      EXPECT_TRUE(mask[qs * S + qs]);
      for (int64_t ks = 0; ks < S; ++ks) {
        if (c.use_doc && c.doc[qs % l.tokens] != c.doc[ks % l.tokens]) {
          EXPECT_FALSE(mask[qs * S + ks]);
        }
      }
    }
  }
}

// ---- the pair count of the tiling rule --------------------------------------------------

TEST(AttentionPairs, SmallCaseByHand) {
  static_assert(ops::kAttentionQueryTile == 64, "the numbers below assume 64-token tiles");
  // sps, T = 100, w = 3, one document: tiles [0, 64) and [64, 100).
  //   tile 0: persistent [0, 64) 64·64, windowed [0, 64) 64·64
  //   tile 1: persistent [0, 100) 36·100, windowed [61, 100) 36·39
  // per query stream 13196, two query streams, two heads.
  AttentionCase c = make_case(1, 100, 2, 0, 3, -1, 2, 8, 1);
  std::fill(c.doc.begin(), c.doc.end(), 0);
  std::fill(c.doc_start.begin(), c.doc_start.end(), 0);
  EXPECT_EQ(ops::attention_pair_count(c.bound()), 2 * 2 * 13196);
  // A document starting at token 64: tile 1 sees [64, 100) in both streams (36·36 each).
  for (int64_t i = 64; i < 100; ++i) c.doc[i] = 1, c.doc_start[i] = 64;
  EXPECT_EQ(ops::attention_pair_count(c.bound()), 2 * 2 * (64 * 64 * 2 + 36 * 36 * 2));
  // The kernel computes exactly that many.
  const std::vector<float> qkv = testing::cast_vector<float>(random_vector(c.qkv_size(), 3));
  std::vector<float> out(c.out_size()), lse(c.slots() * 2);
  EXPECT_EQ(ops::attention_forward(out.data(), lse.data(), qkv.data(), c.bound()),
            2 * 2 * (64 * 64 * 2 + 36 * 36 * 2));
  // standard, T = 130, ω = 10: [0, 64) 64·64, [54, 128) 64·74, [118, 130) 2·12.
  AttentionLayout standard = one_document(130, 1, kInput, 0, 10);
  EXPECT_EQ(ops::attention_pair_count(standard), 64 * 64 + 64 * 74 + 2 * 12);
}

TEST(AttentionPairs, SpsAt4096Window64CostsAtMost55PercentOfDense) {
  const int64_t T = 4096, S = 2 * T;
  const AttentionLayout sps = one_document(T, 2, kInput, 64);
  const double dense = double(S) * double(S + 1) / 2;
  const double ratio = double(ops::attention_pair_count(sps)) / dense;
  EXPECT_LE(ratio, 0.55);
  EXPECT_GE(ratio, 0.5);  // the persistent stream alone is ≈ half of dense causal
  // Standard attention: T·(T + tile)/2 pairs, nothing beyond the causal tiles.
  const AttentionLayout standard = one_document(T, 1, kInput, 0);
  EXPECT_EQ(ops::attention_pair_count(standard), T * (T + ops::kAttentionQueryTile) / 2);
}

}  // namespace
}  // namespace sps
