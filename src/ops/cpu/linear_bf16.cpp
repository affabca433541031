// The CPU's linear in bf16 precision (linear_bf16.h): the operand rounding, the weight copies
// made once per change, the two paths and the choice between them.
#include "ops/cpu/linear_bf16.h"

#include <fmt/format.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <tuple>
#include <type_traits>
#include <vector>

#include "util/float_formats.h"
#include "ops/cpu/cpu_common.h"
#include "ops/cpu/onednn_matmul.h"
#include "ops/ops.h"
#include "util/error.h"
#include "util/large_buffer.h"
#include "util/process_stats.h"

namespace sps::ops::cpu {

namespace {

template <typename Out>
void round_rows(Out* out, int64_t ld_out, const float* in, int64_t ld_in, int64_t rows,
                int64_t cols) {
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelThreshold)
  for (int64_t r = 0; r < rows; ++r) {
    const float* from = in + r * ld_in;
    Out* to = out + r * ld_out;
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) {
      const uint16_t bits = float_to_bf16(from[c]);
      if constexpr (std::is_same_v<Out, float>)
        to[c] = bf16_to_float(bits);
      else
        to[c] = bits;
    }
  }
}

// 64-byte aligned bytes, grown on demand and kept (contents dropped when it grows).
class AlignedBytes {
 public:
  AlignedBytes() = default;
  AlignedBytes(const AlignedBytes&) = delete;
  AlignedBytes& operator=(const AlignedBytes&) = delete;
  ~AlignedBytes() { std::free(data_); }
  void* reserve(size_t bytes) {
    if (bytes > capacity_) {
      std::free(data_);
      data_ = nullptr;  // empty, should the allocation throw
      capacity_ = 0;
      data_ = allocate_large_buffer(bytes);
      capacity_ = bytes;
    }
    return data_;
  }
  void* data() const { return data_; }

 private:
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

template <typename E>
E* scratch(AlignedBytes& bytes, int64_t n) {
  return static_cast<E*>(bytes.reserve(sizeof(E) * size_t(n)));
}

// What a call rounds its activations and gradients into, per thread: grown and kept, so a
// planned step allocates nothing after its first.
struct Scratch {
  AlignedBytes in, dout, weight;
};
Scratch& thread_scratch() {
  thread_local Scratch s;
  return s;
}

// How a GEMM reads a weight matrix W [out_dim, in_dim]: as rounded fp32 rows (rounded_sgemm,
// every GEMM), or reordered for oneDNN as the B of the forward (Wᵀ, [in_dim, out_dim]) or of
// the input gradient (W, [out_dim, in_dim]).
enum class WeightUse { rounded_rows, onednn_forward, onednn_input_gradient };

size_t weight_bytes(WeightUse use, int64_t out_dim, int64_t in_dim) {
  using onednn::DataType;
  switch (use) {
    case WeightUse::rounded_rows: return sizeof(float) * size_t(out_dim * in_dim);
    case WeightUse::onednn_forward: return onednn::prepared_bytes(DataType::bf16, in_dim, out_dim);
    case WeightUse::onednn_input_gradient:
      return onednn::prepared_bytes(DataType::bf16, out_dim, in_dim);
  }
  return 0;
}

// Writes W's operand for `use` into `out` (weight_bytes of it); `bits` is scratch for W's
// bf16 rows on the way to oneDNN's layout.
void convert_weight(WeightUse use, const float* W, int64_t out_dim, int64_t in_dim, void* out,
                    AlignedBytes& bits) {
  if (use == WeightUse::rounded_rows) {
    round_rows_to_bf16(static_cast<float*>(out), in_dim, W, in_dim, out_dim, in_dim);
    return;
  }
  uint16_t* rows16 = scratch<uint16_t>(bits, out_dim * in_dim);
  round_rows_to_bf16(rows16, in_dim, W, in_dim, out_dim, in_dim);
  if (use == WeightUse::onednn_forward)  // B = Wᵀ: [K = in_dim, N = out_dim], stored [N, K]
    onednn::prepare_b(onednn::DataType::bf16, true, in_dim, out_dim, in_dim, rows16, out);
  else  // B = W: [K = out_dim, N = in_dim], stored as it is
    onednn::prepare_b(onednn::DataType::bf16, false, out_dim, in_dim, in_dim, rows16, out);
}

// ---- the weight copies -----------------------------------------------------------------

class Bf16WeightCopies;

// The registered buffers by their first element, under one lock with everything they hold.
struct Registry {
  std::mutex mutex;
  std::map<const float*, Bf16WeightCopies*> buffers;
};
Registry& registry() {
  static Registry& r = *new Registry;  // never destroyed: a static model may outlive it
  return r;
}

class Bf16WeightCopies final : public GemmWeightCopies {
 public:
  Bf16WeightCopies(const float* weights, int64_t n) : weights_(weights), n_(n) {
    Registry& r = registry();
    const std::lock_guard<std::mutex> lock(r.mutex);
    SPS_ASSERT(r.buffers.count(weights) == 0);
    r.buffers[weights] = this;
  }
  ~Bf16WeightCopies() override {
    Registry& r = registry();
    const std::lock_guard<std::mutex> lock(r.mutex);
    r.buffers.erase(weights_);
  }
  void changed() override { generation_.fetch_add(1, std::memory_order_relaxed); }
  int64_t conversions() const override {
    const std::lock_guard<std::mutex> lock(registry().mutex);
    return conversions_;
  }

  bool holds(const float* W, int64_t elements) const {
    return W >= weights_ && W + elements <= weights_ + n_;
  }
  // W's operand for `use`, converted first unless the copy is of the current weights. Called
  // with the registry locked.
  const void* operand(WeightUse use, const float* W, int64_t out_dim, int64_t in_dim,
                      AlignedBytes& bits) {
    Copy& copy = copies_[{W - weights_, out_dim, in_dim, use}];
    const uint64_t now = generation_.load(std::memory_order_relaxed);
    if (copy.generation != now) {
      convert_weight(use, W, out_dim, in_dim,
                     copy.bytes.reserve(weight_bytes(use, out_dim, in_dim)), bits);
      copy.generation = now;
      ++conversions_;
    }
    return copy.bytes.data();
  }

 private:
  struct Copy {
    AlignedBytes bytes;
    uint64_t generation = 0;  // of the weights it was made from; 0: never made
  };
  const float* weights_;
  int64_t n_;
  std::atomic<uint64_t> generation_{1};  // of the weights: changed() counts it up
  int64_t conversions_ = 0;
  std::map<std::tuple<int64_t, int64_t, int64_t, WeightUse>, Copy> copies_;
};

// W's operand for `use`: its copy where a registered buffer holds it, else converted into
// the thread's scratch by this call.
const void* weight_operand(WeightUse use, const float* W, int64_t out_dim, int64_t in_dim) {
  Scratch& s = thread_scratch();
  Registry& r = registry();
  {
    const std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.buffers.upper_bound(W);
    if (it != r.buffers.begin() && (--it)->second->holds(W, out_dim * in_dim))
      return it->second->operand(use, W, out_dim, in_dim, s.in);
  }
  void* out = s.weight.reserve(weight_bytes(use, out_dim, in_dim));
  convert_weight(use, W, out_dim, in_dim, out, s.in);
  return out;
}

// ---- the two paths ---------------------------------------------------------------------

void forward_rounded_sgemm(float* out, const float* in, const float* weight, int64_t rows,
                           int64_t in_dim, int64_t out_dim, bool accumulate, int64_t ld_in,
                           int64_t ld_out) {
  const int64_t lda = ld_in == 0 ? in_dim : ld_in;
  const auto* w =
      static_cast<const float*>(weight_operand(WeightUse::rounded_rows, weight, out_dim, in_dim));
  float* a = scratch<float>(thread_scratch().in, rows * lda);
  round_rows_to_bf16(a, lda, in, lda, rows, in_dim);
  linear_forward(out, a, w, rows, in_dim, out_dim, accumulate, ld_in, ld_out);
}

void backward_rounded_sgemm(float* din, float* dweight, const float* dout, const float* in,
                            const float* weight, int64_t rows, int64_t in_dim, int64_t out_dim,
                            bool accumulate_din, int64_t ld_in, int64_t ld_dout) {
  const int64_t lda = ld_in == 0 ? in_dim : ld_in, ldg = ld_dout == 0 ? out_dim : ld_dout;
  Scratch& s = thread_scratch();
  // The rounded copies keep the strides of what they copy, so linear_backward reads them,
  // and writes din, as it would the originals.
  float* g = scratch<float>(s.dout, rows * ldg);
  round_rows_to_bf16(g, ldg, dout, ldg, rows, out_dim);
  const float* w = nullptr;
  if (din)
    w = static_cast<const float*>(weight_operand(WeightUse::rounded_rows, weight, out_dim, in_dim));
  float* a = nullptr;
  if (dweight) {
    a = scratch<float>(s.in, rows * lda);
    round_rows_to_bf16(a, lda, in, lda, rows, in_dim);
  }
  linear_backward(din, dweight, g, a, w, rows, in_dim, out_dim, accumulate_din, ld_in, ld_dout);
}

onednn::Gemm bf16_gemm(int64_t M, int64_t N, int64_t K, int64_t ldc, bool accumulate) {
  onednn::Gemm g;
  g.type = onednn::DataType::bf16;
  g.M = M, g.N = N, g.K = K, g.lda = K, g.ldc = ldc;
  g.accumulate = accumulate;
  return g;
}

// False (nothing done) where oneDNN has no bf16 matmul of these shapes.
bool forward_onednn(float* out, const float* in, const float* weight, int64_t rows, int64_t in_dim,
                    int64_t out_dim, bool accumulate, int64_t ld_in, int64_t ld_out) {
  if (rows == 0 || in_dim == 0 || out_dim == 0) return false;
  onednn::Gemm g = bf16_gemm(rows, out_dim, in_dim, ld_out == 0 ? out_dim : ld_out, accumulate);
  g.prepared_b = true;
  if (!onednn::can_prepare(g.type, in_dim, out_dim) || !onednn::available(g)) return false;
  const void* w = weight_operand(WeightUse::onednn_forward, weight, out_dim, in_dim);
  uint16_t* a = scratch<uint16_t>(thread_scratch().in, rows * in_dim);
  round_rows_to_bf16(a, in_dim, in, ld_in == 0 ? in_dim : ld_in, rows, in_dim);
  onednn::run(g, a, w, out);
  return true;
}

bool backward_onednn(float* din, float* dweight, const float* dout, const float* in,
                     const float* weight, int64_t rows, int64_t in_dim, int64_t out_dim,
                     bool accumulate_din, int64_t ld_in, int64_t ld_dout) {
  if (rows == 0 || in_dim == 0 || out_dim == 0) return false;
  const int64_t lda = ld_in == 0 ? in_dim : ld_in;
  // din[rows, in_dim] (+)= dout · W: B = W, prepared.
  onednn::Gemm input = bf16_gemm(rows, in_dim, out_dim, lda, accumulate_din);
  input.prepared_b = true;
  // dW[out_dim, in_dim] += doutᵀ · in: A = dout read transposed, B = in as it is.
  onednn::Gemm weights = bf16_gemm(out_dim, in_dim, rows, in_dim, true);
  weights.trans_a = true;
  weights.lda = out_dim;
  weights.ldb = in_dim;
  if ((din && (!onednn::can_prepare(input.type, out_dim, in_dim) || !onednn::available(input))) ||
      (dweight && !onednn::available(weights)))
    return false;
  Scratch& s = thread_scratch();
  uint16_t* g = scratch<uint16_t>(s.dout, rows * out_dim);
  round_rows_to_bf16(g, out_dim, dout, ld_dout == 0 ? out_dim : ld_dout, rows, out_dim);
  if (din)
    onednn::run(input, g, weight_operand(WeightUse::onednn_input_gradient, weight, out_dim, in_dim),
                din);
  if (dweight) {
    uint16_t* a = scratch<uint16_t>(s.in, rows * in_dim);
    round_rows_to_bf16(a, in_dim, in, lda, rows, in_dim);
    onednn::run(weights, g, a, dweight);
  }
  return true;
}

// ---- the choice ------------------------------------------------------------------------

// Median GFLOP/s of a forward of n×n×n on `path`, its weights copied once.
double forward_rate(Bf16Path path, int64_t n) {
  std::vector<float> in(n * n), weight(n * n), out(n * n);
  for (int64_t i = 0; i < n * n; ++i) {
    in[i] = float((i * 7919) % 1009) / 1009.0f - 0.5f;
    weight[i] = float((i * 104729) % 1013) / 1013.0f - 0.5f;
  }
  const auto copies = bf16_weight_copies(weight.data(), n * n);
  std::vector<double> rates;
  for (int run = 0; run < 4; ++run) {
    const double t0 = now_seconds();
    linear_forward_bf16(path, out.data(), in.data(), weight.data(), n, n, n, false);
    if (run > 0) rates.push_back(2.0 * double(n * n * n) / (now_seconds() - t0) / 1e9);
  }
  return median(rates);
}

Bf16Choice choose() {
  constexpr int64_t n = 1024;
  onednn::Gemm g = bf16_gemm(n, n, n, n, false);
  g.prepared_b = true;
  const std::string rounded = "operands rounded to bf16 and multiplied by sgemm, fp32 sums";
  if (!onednn::can_prepare(g.type, n, n) || !onednn::available(g))
    return {Bf16Path::rounded_sgemm,
            fmt::format("bf16 GEMMs: {} ({} has no bf16 matmul on this CPU: ISA {})", rounded,
                        onednn::version(), onednn::cpu_isa())};
  const double native = forward_rate(Bf16Path::onednn, n);
  const double fallback = forward_rate(Bf16Path::rounded_sgemm, n);
  const std::string measured = fmt::format(
      "measured at {}³: {} bf16 matmul {} {:.0f} GFLOP/s, {} {:.0f}", n, onednn::version(),
      onednn::implementation(g), native, "rounded operands by sgemm", fallback);
  if (native > fallback)
    return {Bf16Path::onednn, fmt::format("bf16 GEMMs: {} bf16 matmul, {} ({})", onednn::version(),
                                          onednn::implementation(g), measured)};
  return {Bf16Path::rounded_sgemm, fmt::format("bf16 GEMMs: {} ({})", rounded, measured)};
}

}  // namespace

void round_rows_to_bf16(float* out, int64_t ld_out, const float* in, int64_t ld_in, int64_t rows,
                        int64_t cols) {
  round_rows(out, ld_out, in, ld_in, rows, cols);
}

void round_rows_to_bf16(uint16_t* out, int64_t ld_out, const float* in, int64_t ld_in, int64_t rows,
                        int64_t cols) {
  round_rows(out, ld_out, in, ld_in, rows, cols);
}

const Bf16Choice& bf16_gemm_choice() {
  static const Bf16Choice choice = choose();
  return choice;
}

void linear_forward_bf16(Bf16Path path, float* out, const float* in, const float* weight,
                         int64_t rows, int64_t in_dim, int64_t out_dim, bool accumulate,
                         int64_t ld_in, int64_t ld_out) {
  if (path == Bf16Path::onednn &&
      forward_onednn(out, in, weight, rows, in_dim, out_dim, accumulate, ld_in, ld_out))
    return;
  forward_rounded_sgemm(out, in, weight, rows, in_dim, out_dim, accumulate, ld_in, ld_out);
}

void linear_backward_bf16(Bf16Path path, float* din, float* dweight, const float* dout,
                          const float* in, const float* weight, int64_t rows, int64_t in_dim,
                          int64_t out_dim, bool accumulate_din, int64_t ld_in, int64_t ld_dout) {
  if (path == Bf16Path::onednn && backward_onednn(din, dweight, dout, in, weight, rows, in_dim,
                                                  out_dim, accumulate_din, ld_in, ld_dout))
    return;
  backward_rounded_sgemm(din, dweight, dout, in, weight, rows, in_dim, out_dim, accumulate_din,
                         ld_in, ld_dout);
}

std::unique_ptr<GemmWeightCopies> bf16_weight_copies(const float* weights, int64_t n) {
  return std::make_unique<Bf16WeightCopies>(weights, n);
}

}  // namespace sps::ops::cpu
