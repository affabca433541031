// The inference linears against linear_forward (BLAS), for every row count, with dimension
// tails and accumulation: linear_decode_forward on the row layout, and linear_packed_forward
// over pack_weight_rows' layout (with in_dim past one chunk of a panel too), whose result for
// a row is moreover bit for bit the same whatever rows are computed beside it. In bf16 and in
// int8 the packed kernel equals, bit for bit, the definition of ops/weight_type.h computed
// here apart from the library; and the embedding gathered from a table in each layout is the
// table's (rounded) rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "float_reference.h"
#include "gradcheck.h"
#include "ops/cpu/cpu_common.h"
#include "ops/cpu/linear_packed.h"
#include "ops/ops.h"

namespace sps {
namespace {

using ops::WeightType;
using testing::cast_vector;
using testing::max_relative_error;
using testing::random_vector;
using testing::reference_bf16;
using testing::reference_q8_row;

constexpr WeightType kTypes[] = {WeightType::f32, WeightType::bf16, WeightType::int8};

// The value a weight stands for once stored in `type`, from the formats' definitions
// (float_reference.h) apart from the library's conversions: bf16 rounded to nearest, ties to
// even; int8 GGUF's Q8_0 over blocks of 32 along a row.
template <typename T>
std::vector<T> reference_weights(const std::vector<T>& weight, int64_t in_dim, WeightType type) {
  std::vector<T> out(weight.size());
  for (size_t r = 0; r * in_dim < weight.size(); ++r) {
    std::vector<float> row(weight.begin() + r * in_dim, weight.begin() + (r + 1) * in_dim);
    const std::vector<double> q8 = type == WeightType::int8 ? reference_q8_row(row.data(), in_dim)
                                                            : std::vector<double>{};
    for (int64_t k = 0; k < in_dim; ++k)
      out[r * in_dim + k] = type == WeightType::f32    ? weight[r * in_dim + k]
                            : type == WeightType::bf16 ? T(reference_bf16(row[k]))
                                                       : T(q8[k]);
  }
  return out;
}

template <typename T>
std::vector<uint8_t> pack(const std::vector<T>& weight, int64_t in_dim, int64_t out_dim,
                          WeightType type, int64_t panels_per_call = 0) {
  std::vector<uint8_t> packed(ops::packed_weight_bytes<T>(type, in_dim, out_dim));
  const int64_t step =
      panels_per_call ? panels_per_call * ops::packed_panel_rows<T>() : std::max<int64_t>(out_dim, 1);
  for (int64_t first = 0; first < out_dim; first += step)
    ops::pack_weight_rows(type, packed.data(), weight.data() + first * in_dim, first,
                          std::min(step, out_dim - first), in_dim, out_dim, "test weight");
  return packed;
}

template <typename T>
struct LinearCase {
  int64_t rows, in_dim, out_dim;
  std::vector<T> in, weight, start;
  LinearCase(int64_t rows, int64_t in_dim, int64_t out_dim)
      : rows(rows), in_dim(in_dim), out_dim(out_dim),
        in(cast_vector<T>(random_vector(rows * in_dim, 1 + rows))),
        weight(cast_vector<T>(random_vector(out_dim * in_dim, 2 + in_dim))),
        start(cast_vector<T>(random_vector(rows * out_dim, 3 + out_dim))) {}
  std::vector<T> blas(bool accumulate) const {
    std::vector<T> out = start;
    ops::linear_forward(out.data(), in.data(), weight.data(), rows, in_dim, out_dim, accumulate);
    return out;
  }
  std::vector<T> decode(bool accumulate) const {
    std::vector<T> out = start;
    ops::linear_decode_forward(out.data(), in.data(), weight.data(), rows, in_dim, out_dim,
                               accumulate);
    return out;
  }
  std::vector<T> packed_forward(const std::vector<uint8_t>& packed, WeightType type,
                                bool accumulate) const {
    std::vector<T> out = start;
    ops::linear_packed_forward(out.data(), in.data(), packed.data(), type, rows, in_dim, out_dim,
                               accumulate);
    return out;
  }
};

template <typename T>
void check(int64_t rows, int64_t in_dim, int64_t out_dim, double tolerance) {
  const LinearCase<T> c(rows, in_dim, out_dim);
  const std::vector<uint8_t> packed = pack(c.weight, in_dim, out_dim, WeightType::f32);
  for (bool accumulate : {false, true}) {
    const std::vector<T> expected = c.blas(accumulate);
    EXPECT_LT(max_relative_error(c.decode(accumulate).data(), expected.data(), rows * out_dim),
              tolerance)
        << "decode: rows " << rows << " in " << in_dim << " out " << out_dim << " acc " << accumulate;
    EXPECT_LT(max_relative_error(c.packed_forward(packed, WeightType::f32, accumulate).data(),
                                 expected.data(), rows * out_dim),
              tolerance)
        << "packed: rows " << rows << " in " << in_dim << " out " << out_dim << " acc " << accumulate;
  }
}

TEST(LinearInference, EqualsLinearForEveryRowCount) {
  for (int64_t rows = 1; rows <= 20; ++rows) {
    check<double>(rows, 37, 13, 1e-13);  // one narrow panel
    check<double>(rows, 21, 40, 1e-13);  // full panels and a narrow one
    check<float>(rows, 64, 10, 1e-5);
    check<float>(rows, 64, 80, 1e-5);
    check<float>(rows, 3, 5, 1e-5);
  }
  check<float>(8, 768, 1031, 1e-5);  // large enough to run in parallel
  check<float>(5, 150, 40, 1e-5);    // in_dim past two of few rows' (smaller) chunks
  check<float>(40, 700, 96, 1e-5);   // in_dim past one chunk of a panel
  check<float>(300, 256, 768, 1e-5); // a prefill's rows
}

// bf16 weights, by the definition of ops/weight_type.h computed here: inputs and weights
// rounded by the independent reference, each output the chain over the pairs of in_dim,
// x[2p + 1]·w[2p + 1] then x[2p]·w[2p], one fused multiply-add each (a zero pair element after
// an odd in_dim), bit for bit, for row counts of every micro-kernel, in_dim past the chunks of
// few and many rows, odd in_dim, narrow last panels; and close to BLAS on the rounded values.
template <typename T>
std::vector<T> reference_bf16_linear(const LinearCase<T>& c, bool accumulate) {
  const int64_t K = c.in_dim;
  const std::vector<T> x = reference_weights(c.in, K, WeightType::bf16),
                       w = reference_weights(c.weight, K, WeightType::bf16);
  std::vector<T> out = c.start;
  for (int64_t m = 0; m < c.rows; ++m)
    for (int64_t n = 0; n < c.out_dim; ++n) {
      T sum = accumulate ? out[m * c.out_dim + n] : T(0);
      for (int64_t k = 0; k < K; k += 2) {
        const bool odd = k + 1 < K;
        sum = std::fma(odd ? x[m * K + k + 1] : T(0), odd ? w[n * K + k + 1] : T(0), sum);
        sum = std::fma(x[m * K + k], w[n * K + k], sum);
      }
      out[m * c.out_dim + n] = sum;
    }
  return out;
}

template <typename T>
void check_bf16(int64_t rows, int64_t in_dim, int64_t out_dim) {
  const LinearCase<T> c(rows, in_dim, out_dim);
  const WeightType type = WeightType::bf16;
  const std::vector<uint8_t> packed = pack(c.weight, in_dim, out_dim, type);
  LinearCase<T> on_rounded = c;
  on_rounded.in = reference_weights(c.in, in_dim, type);
  on_rounded.weight = reference_weights(c.weight, in_dim, type);
  for (bool accumulate : {false, true}) {
    const std::vector<T> got = c.packed_forward(packed, type, accumulate);
    const std::vector<T> expected = reference_bf16_linear(c, accumulate);
    EXPECT_EQ(0, std::memcmp(got.data(), expected.data(), sizeof(T) * got.size()))
        << ops::weight_type_name(type) << ": rows " << rows << " in " << in_dim << " out "
        << out_dim << " acc " << accumulate;
    EXPECT_LT(max_relative_error(got, on_rounded.blas(accumulate)), sizeof(T) == 4 ? 1e-5 : 1e-12)
        << ops::weight_type_name(type) << ": rows " << rows;
  }
}

TEST(LinearInference, Bf16IsItsDefinition) {
  for (int64_t rows = 1; rows <= 9; ++rows) {
    check_bf16<float>(rows, 64, 80);
    check_bf16<float>(rows, 45, 19);  // odd in_dim; a narrow panel
    check_bf16<double>(rows, 70, 21);
  }
  check_bf16<float>(2, 1100, 48);   // past the 4 KB chunks at few rows
  check_bf16<float>(20, 1100, 32);  // and past the 16 KB ones of many rows
  check_bf16<float>(19, 301, 40);   // many rows, odd in_dim
  check_bf16<double>(17, 300, 21);  // the same in double, a narrow panel
  check_bf16<float>(8, 768, 1031);  // in parallel
}

// The input rows are rounded as the reference rounds (ties to even, past the largest finite to
// infinity), in the vector lanes and in the scalar tail: through identity weights each output
// is its rounded input, and a row holding a NaN is NaN throughout, one holding an infinity, or
// a value that rounds to one, that infinity where its identity weight is and NaN elsewhere
// (∞ · 0); the rows beside them untouched.
TEST(LinearInference, Bf16RoundsEachInputAsTheReference) {
  for (const int64_t K : {40, 41}) {
    std::vector<float> weight(K * K, 0.0f), in(4 * K);
    for (int64_t k = 0; k < K; ++k) weight[k * K + k] = 1.0f;
    const std::vector<double> values = random_vector(K, 7);
    const float ulp = 1.0f / 128, ties[] = {1 + ulp / 2, 1 + 3 * ulp / 2, -(1 + ulp / 2),
                                            -(2 + 3 * ulp), 0.0f, -0.0f, 1e-3f * (1 + ulp / 2)};
    for (int64_t k = 0; k < K; ++k) {
      in[k] = k < 7 ? ties[k] : float(values[k]);
      in[K + k] = in[2 * K + k] = in[3 * K + k] = float(values[k]);
    }
    in[K + K - 1] = std::nanf("");
    in[2 * K + 3] = -INFINITY;
    in[3 * K + 33] = std::numeric_limits<float>::max();  // rounds to infinity (the tail)
    std::vector<float> out(4 * K);
    const std::vector<uint8_t> packed = pack(weight, K, K, WeightType::bf16);
    ops::linear_packed_forward(out.data(), in.data(), packed.data(), WeightType::bf16, 4, K, K,
                               false);
    for (int64_t k = 0; k < K; ++k) {
      EXPECT_EQ(out[k], float(reference_bf16(in[k]))) << "K " << K << " input " << k;
      for (int64_t m = 1; m < 4; ++m) {
        const float expected = m == 2 && k == 3 ? -INFINITY : m == 3 && k == 33 ? INFINITY : NAN;
        EXPECT_TRUE(std::isnan(expected) ? std::isnan(out[m * K + k]) : out[m * K + k] == expected)
            << "K " << K << " row " << m << " output " << k << ": " << out[m * K + k];
      }
    }
  }
}

// Half away from zero, as Q8_0 rounds.
double round_half_away(double x) { return x < 0 ? -std::floor(-x + 0.5) : std::floor(x + 0.5); }

// One block of up to 32 values quantized: the integers (zero-padded to 32) and the scale.
// Weights as GGUF's Q8_0 (q = round(x · (1/d)), the scale d rounded to fp16); activations as
// ops/weight_type.h says (q = round(x / d), d kept in T, NaN for a non-finite block).
template <typename T>
struct ReferenceBlock {
  int32_t q[32] = {};
  double scale = 0;
};
template <typename T>
ReferenceBlock<T> reference_block(const T* x, int64_t n, bool weights) {
  ReferenceBlock<T> block;
  if (weights) {
    float amax = 0;
    for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(float(x[i])));
    const float d = amax / 127.0f, inverse = d != 0 ? 1.0f / d : 0.0f;
    for (int64_t i = 0; i < n; ++i) block.q[i] = int32_t(round_half_away(float(x[i]) * inverse));
    block.scale = testing::reference_f16(d);
    return block;
  }
  T amax = 0;
  bool finite = true;
  for (int64_t i = 0; i < n; ++i) {
    finite = finite && std::isfinite(x[i]);
    amax = std::max(amax, std::fabs(x[i]));
  }
  const T d = amax / T(127);
  for (int64_t i = 0; i < n && finite && d != 0; ++i) block.q[i] = int32_t(round_half_away(x[i] / d));
  block.scale = finite ? double(d) : NAN;
  return block;
}

// The int8 linear by its definition: per output, fma(I_b, w_b · a_b, sum) over the blocks.
template <typename T>
std::vector<T> reference_int8_linear(const LinearCase<T>& c, bool accumulate) {
  std::vector<T> out = c.start;
  const int64_t K = c.in_dim;
  for (int64_t m = 0; m < c.rows; ++m)
    for (int64_t j = 0; j < c.out_dim; ++j) {
      T sum = accumulate ? out[m * c.out_dim + j] : T(0);
      for (int64_t k0 = 0; k0 < K; k0 += 32) {
        const int64_t n = std::min<int64_t>(32, K - k0);
        const ReferenceBlock<T> a = reference_block(c.in.data() + m * K + k0, n, false);
        const ReferenceBlock<T> w = reference_block(c.weight.data() + j * K + k0, n, true);
        int32_t dot = 0;
        for (int i = 0; i < 32; ++i) dot += a.q[i] * w.q[i];
        sum = ops::cpu::fused_multiply_add(T(dot), T(w.scale) * T(a.scale), sum);
      }
      out[m * c.out_dim + j] = sum;
    }
  return out;
}

// int8: the packed kernel's result is the definition's, bit for bit, for row counts of every
// micro-kernel, in_dim with a partial block and past a chunk of a panel, narrow last panels,
// float and double; and within the quantization's error of BLAS on the f32 weights.
template <typename T>
void check_int8(int64_t rows, int64_t in_dim, int64_t out_dim) {
  const LinearCase<T> c(rows, in_dim, out_dim);
  const std::vector<uint8_t> packed = pack(c.weight, in_dim, out_dim, WeightType::int8);
  for (bool accumulate : {false, true}) {
    const std::vector<T> got = c.packed_forward(packed, WeightType::int8, accumulate);
    const std::vector<T> expected = reference_int8_linear(c, accumulate);
    EXPECT_EQ(0, std::memcmp(got.data(), expected.data(), sizeof(T) * got.size()))
        << "rows " << rows << " in " << in_dim << " out " << out_dim << " acc " << accumulate;
    EXPECT_LT(max_relative_error(got, c.blas(accumulate)), 0.05) << "rows " << rows;
  }
}

TEST(LinearInference, Int8IsItsDefinition) {
  for (int64_t rows = 1; rows <= 13; ++rows) {  // every pass size, and two or three passes
    check_int8<float>(rows, 64, 80);
    check_int8<float>(rows, 45, 19);  // a partial block of 13; a narrow panel
    check_int8<double>(rows, 70, 21);
  }
  check_int8<float>(2, 1100, 48);   // past a chunk of a panel
  check_int8<float>(20, 1100, 32);  // and with many rows
  check_int8<float>(8, 768, 1031);  // in parallel
}

// Activations that quantize to exact halves (a block's max 127, so its scale is 1) round away
// from zero (ops/weight_type.h), in a decode's one row and a prefill's many (in parallel),
// whole blocks (in vector lanes) and a part of one (in scalars).
TEST(LinearInference, Int8RoundsActivationHalvesAwayFromZero) {
  const int64_t K = 80;  // two whole blocks and 16 values
  for (const int64_t rows : {1, 300}) {
    LinearCase<float> c(rows, K, 40);
    const float halves[] = {127, 0.5f, -0.5f, 1.5f, -2.5f, 126.5f, -126.5f, 3.5f};
    for (int64_t m = 0; m < rows; ++m)
      for (int64_t i = 0; i < K; ++i)
        c.in[m * K + i] = halves[(i + m) % 8] * (i / 32 == 1 ? -1 : 1);
    std::fill(c.in.begin() + 32, c.in.begin() + 64, 0.0f);  // and a block of zeros (scale 0)
    const std::vector<uint8_t> packed = pack(c.weight, K, 40, WeightType::int8);
    const std::vector<float> got = c.packed_forward(packed, WeightType::int8, false);
    const std::vector<float> expected = reference_int8_linear(c, false);
    EXPECT_EQ(0, std::memcmp(got.data(), expected.data(), sizeof(float) * got.size())) << rows;
  }
}

// A NaN or an infinity in an input row makes that row's int8 outputs NaN, no other row's.
TEST(LinearInference, Int8NonFiniteInputsPoisonTheirRowOnly) {
  LinearCase<float> c(3, 64, 40);
  c.in[1 * 64 + 40] = NAN;
  c.in[2 * 64 + 3] = INFINITY;
  const std::vector<uint8_t> packed = pack(c.weight, 64, 40, WeightType::int8);
  const std::vector<float> got = c.packed_forward(packed, WeightType::int8, false);
  for (int64_t j = 0; j < 40; ++j) {
    EXPECT_TRUE(std::isfinite(got[j])) << j;
    EXPECT_TRUE(std::isnan(got[40 + j])) << j;
    EXPECT_TRUE(std::isnan(got[80 + j])) << j;
  }
}

TEST(LinearInference, APackedRowsResultIgnoresTheOtherRows) {
  const int64_t in_dim = 600, out_dim = 72, max_rows = 19;
  const LinearCase<float> c(max_rows, in_dim, out_dim);
  for (const WeightType type : kTypes) {
    const std::vector<uint8_t> packed = pack(c.weight, in_dim, out_dim, type);
    for (bool accumulate : {false, true}) {
      const std::vector<float> all = c.packed_forward(packed, type, accumulate);
      for (int64_t rows = 1; rows < max_rows; ++rows)
        for (int64_t first = 0; first + rows <= max_rows; first += rows) {
          std::vector<float> part(c.start.begin() + first * out_dim,
                                  c.start.begin() + (first + rows) * out_dim);
          ops::linear_packed_forward(part.data(), c.in.data() + first * in_dim, packed.data(),
                                     type, rows, in_dim, out_dim, accumulate);
          EXPECT_EQ(0, std::memcmp(part.data(), all.data() + first * out_dim,
                                   sizeof(float) * rows * out_dim))
              << ops::weight_type_name(type) << ": " << rows << " rows from row " << first
              << ", accumulate " << accumulate;
        }
    }
  }
}

// Many rows (a prefill's, a scoring batch's) are multiplied in blocks of rows whose inputs stay
// in cache; each row's result is still the one it has alone, at the blocks' edges too. At
// in_dim 600, 150 rows are three blocks of f32 inputs (54 rows, 128 KB) and a part.
TEST(LinearInference, ManyRowsGiveEachRowItsOwnResult) {
  const int64_t in_dim = 600, out_dim = 72, rows = 150;
  const LinearCase<float> c(rows, in_dim, out_dim);
  for (const WeightType type : kTypes) {
    const std::vector<uint8_t> packed = pack(c.weight, in_dim, out_dim, type);
    for (bool accumulate : {false, true}) {
      const std::vector<float> all = c.packed_forward(packed, type, accumulate);
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<float> row(c.start.begin() + r * out_dim, c.start.begin() + (r + 1) * out_dim);
        ops::linear_packed_forward(row.data(), c.in.data() + r * in_dim, packed.data(), type, 1,
                                   in_dim, out_dim, accumulate);
        EXPECT_EQ(0, std::memcmp(row.data(), all.data() + r * out_dim, sizeof(float) * out_dim))
            << ops::weight_type_name(type) << ": row " << r << ", accumulate " << accumulate;
      }
    }
  }
}

// Packing a few panels per call (as a model does, straight from a file) writes the bytes one
// call writes.
TEST(LinearInference, PackingPanelsAtATimeEqualsPackingAtOnce) {
  const int64_t in_dim = 70, out_dim = 16 * 5 + 3;
  const std::vector<float> weight = cast_vector<float>(random_vector(in_dim * out_dim, 9));
  for (const WeightType type : kTypes)
    for (const int64_t panels : {1, 2, 3})
      EXPECT_EQ(pack(weight, in_dim, out_dim, type, panels), pack(weight, in_dim, out_dim, type))
          << ops::weight_type_name(type) << ", " << panels << " panels per call";
}

// The embedding read from a table packed as a LM head (full panels and a narrower last one,
// repeated tokens, the first and last ids) equals the (rounded) table's rows.
TEST(LinearInference, EmbeddingFromAPackedTableEqualsTheTable) {
  for (const WeightType type : kTypes)
    for (const int64_t V : {int64_t(13), int64_t(64), int64_t(70)}) {
      const int64_t d = 41;
      const std::vector<float> table = cast_vector<float>(random_vector(V * d, 5));
      const std::vector<float> rounded = reference_weights(table, d, type);
      const std::vector<uint8_t> packed = pack(table, d, V, type);
      const std::vector<int32_t> tokens = {0, int32_t(V - 1), 5, int32_t(V / 2), 5,
                                           int32_t(V - 2)};
      const int64_t n = int64_t(tokens.size());
      std::vector<float> expected(n * d), got(n * d, -1.0f);
      ops::embedding_forward(expected.data(), tokens.data(), rounded.data(), n, d);
      ops::embedding_packed_forward(got.data(), tokens.data(), packed.data(), type, n, d, V);
      EXPECT_EQ(got, expected) << ops::weight_type_name(type) << ", V " << V;
    }
}

// Every build of the packed linear this CPU runs (linear_packed.h: the build's own, and the
// AVX-512, VNNI and BF16 ones of a portable x86 build on a CPU that has those) gives the
// baseline's bits, each with its own panels, in every weight type, for a decode's few rows and
// a prefill's many; where only one runs the test says why.
TEST(LinearInference, EveryRunnableVariantGivesTheSameBits) {
  const auto variants = ops::runnable_packed_linear_variants<float>();
  ASSERT_EQ(std::string(variants.front()->variant), "baseline");
  for (const int64_t rows : {7, 40}) {
    for (const WeightType type : kTypes) {
      const LinearCase<float> c(rows, 300, 16 * 5 + 3);
      std::vector<std::vector<float>> outputs;
      for (const ops::PackedLinearKernels<float>* k : variants) {
        std::vector<uint8_t> packed(k->weight_bytes(type, c.in_dim, c.out_dim));
        k->pack_weight_rows(type, packed.data(), c.weight.data(), 0, c.out_dim, c.in_dim,
                            c.out_dim, "w");
        outputs.push_back(c.start);
        k->forward(outputs.back().data(), c.in.data(), packed.data(), type, c.rows, c.in_dim,
                   c.out_dim, true);
      }
      for (size_t i = 1; i < outputs.size(); ++i)
        EXPECT_EQ(0, std::memcmp(outputs[i].data(), outputs[0].data(),
                                 sizeof(float) * outputs[0].size()))
            << variants[i]->variant << ", " << ops::weight_type_name(type) << ", rows " << rows;
    }
  }
  if (variants.size() == 1)
    GTEST_SKIP() << "only the baseline build runs here (no AVX-512 build in this binary, or no "
                    "AVX-512F/BW/DQ/VL on this CPU)";
}

// The process runs, of the runnable builds of its vector width, the last: the one whose extra
// instructions (VNNI, BF16) do the int8 and bf16 work in fewer steps; only widths are timed.
TEST(LinearInference, TheChosenVariantIsTheMostCapableOfItsWidth) {
  const auto variants = ops::runnable_packed_linear_variants<float>();
  const ops::PackedLinearKernels<float>& chosen = ops::packed_linear<float>();
  const auto at = std::find(variants.begin(), variants.end(), &chosen);
  ASSERT_NE(at, variants.end());
  for (auto later = at + 1; later != variants.end(); ++later)
    EXPECT_NE((*later)->vector_bytes, chosen.vector_bytes)
        << chosen.variant << " was chosen over " << (*later)->variant;
  if (variants.size() == 1) GTEST_SKIP() << "only the baseline build runs here";
}

// A block whose values reach beyond what an fp16 scale times 127 holds is refused by name.
TEST(LinearInference, Int8RefusesWeightsBeyondItsRange) {
  std::vector<float> weight(32 * 16, 1.0f);
  weight[3] = 1e7f;
  std::vector<uint8_t> packed(ops::packed_weight_bytes<float>(WeightType::int8, 32, 16));
  try {
    ops::pack_weight_rows(WeightType::int8, packed.data(), weight.data(), 0, 16, 32, 16,
                          "layer 3's weight");
    FAIL() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("layer 3's weight"), std::string::npos) << e.what();
  }
}

// The packed sizes: bf16 half of f32, int8 one byte per weight and an fp16 per block of 32
// (a partial last block padded).
TEST(LinearInference, PackedBytesPerType) {
  const int64_t in_dim = 768, out_dim = 2304;
  EXPECT_EQ(ops::packed_weight_bytes<float>(WeightType::f32, in_dim, out_dim), 4 * in_dim * out_dim);
  EXPECT_EQ(ops::packed_weight_bytes<float>(WeightType::bf16, in_dim, out_dim), 2 * in_dim * out_dim);
  EXPECT_EQ(ops::packed_weight_bytes<float>(WeightType::int8, in_dim, out_dim),
            in_dim * out_dim + 2 * (in_dim / 32) * out_dim);
  EXPECT_EQ(ops::packed_weight_bytes<float>(WeightType::int8, 45, 3), 2 * (32 + 2) * 3);
}

}  // namespace
}  // namespace sps
