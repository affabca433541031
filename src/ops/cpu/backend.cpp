// The CPU backend: host memory (64-byte aligned, untouched pages never faulted in) and the
// ops of ops/cpu; in bf16 precision (float only) its linears are those of linear_bf16.h.
#include "ops/backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>

#include "ops/cpu/linear_bf16.h"
#include "ops/ops.h"
#include "util/error.h"

namespace sps::ops {

namespace {

template <typename T>
class CpuBackend final : public Backend<T> {
 public:
  explicit CpuBackend(Precision precision = Precision::fp32) : bf16_(precision == Precision::bf16) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
    SPS_ASSERT((!bf16_ || std::is_same_v<T, float>));
  }
  std::unique_ptr<GemmWeightCopies> gemm_weight_copies(const T* weights, int64_t n) const override {
    if constexpr (std::is_same_v<T, float>)
      if (bf16_) return cpu::bf16_weight_copies(weights, n);
    return nullptr;
  }
  std::string describe_gemms() const override {
    return bf16_ ? cpu::bf16_gemm_choice().description : "";
  }
  Device device() const override { return {}; }
  bool host_accessible() const override { return true; }
  void* allocate(size_t bytes) const override {
    constexpr size_t kAlignment = 64;
    if (bytes > SIZE_MAX - kAlignment) throw std::bad_alloc();
    void* p = std::aligned_alloc(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
    if (!p) throw std::bad_alloc();
    return p;
  }
  void release(void* pointer) const override { std::free(pointer); }
  void copy(void* to, const void* from, size_t bytes) const override {
    std::memcpy(to, from, bytes);
  }
  void upload(void* to, const void* host, size_t bytes) const override {
    std::memcpy(to, host, bytes);
  }
  void download(void* host, const void* from, size_t bytes) const override {
    std::memcpy(host, from, bytes);
  }
  int64_t available_bytes() const override { return available_memory_bytes(); }
  void fill(T* x, int64_t n, T value) const override { std::fill(x, x + n, value); }
  void copy_rows(T* dst, const T* src, const int64_t* to, const int64_t* from, int64_t n,
                 int64_t width) const override {
    ops::copy_rows(dst, src, to, from, n, width);
  }

  void linear_forward(T* out, const T* in, const T* weight, int64_t rows, int64_t in_dim,
                      int64_t out_dim, bool accumulate, int64_t ld_in,
                      int64_t ld_out) const override {
    if constexpr (std::is_same_v<T, float>)
      if (bf16_)
        return cpu::linear_forward_bf16(cpu::bf16_gemm_choice().path, out, in, weight, rows, in_dim,
                                        out_dim, accumulate, ld_in, ld_out);
    ops::linear_forward(out, in, weight, rows, in_dim, out_dim, accumulate, ld_in, ld_out);
  }
  void linear_backward(T* din, T* dweight, const T* dout, const T* in, const T* weight,
                       int64_t rows, int64_t in_dim, int64_t out_dim, bool accumulate_din,
                       int64_t ld_in, int64_t ld_dout) const override {
    if constexpr (std::is_same_v<T, float>)
      if (bf16_)
        return cpu::linear_backward_bf16(cpu::bf16_gemm_choice().path, din, dweight, dout, in,
                                         weight, rows, in_dim, out_dim, accumulate_din, ld_in,
                                         ld_dout);
    ops::linear_backward(din, dweight, dout, in, weight, rows, in_dim, out_dim, accumulate_din,
                         ld_in, ld_dout);
  }
  // bf16: a decode step's GEMMs on bf16 operands too (as on CUDA), through the same path.
  void linear_decode_forward(T* out, const T* in, const T* weight, int64_t rows, int64_t in_dim,
                             int64_t out_dim, bool accumulate) const override {
    if (bf16_) return linear_forward(out, in, weight, rows, in_dim, out_dim, accumulate, 0, 0);
    ops::linear_decode_forward(out, in, weight, rows, in_dim, out_dim, accumulate);
  }
  // In bf16 precision the weights keep their rows: the GEMMs read the bf16 copies.
  int64_t packed_panel_rows() const override { return bf16_ ? 0 : ops::packed_panel_rows<T>(); }
  int64_t packed_weight_bytes(WeightType type, int64_t in_dim, int64_t out_dim) const override {
    return ops::packed_weight_bytes<T>(type, in_dim, out_dim);
  }
  void pack_weight_rows(WeightType type, void* packed, const T* rows, int64_t first_row,
                        int64_t row_count, int64_t in_dim, int64_t out_dim,
                        const std::string& what) const override {
    ops::pack_weight_rows(type, packed, rows, first_row, row_count, in_dim, out_dim, what);
  }
  void linear_packed_forward(T* out, const T* in, const void* packed, WeightType type,
                             int64_t rows, int64_t in_dim, int64_t out_dim,
                             bool accumulate) const override {
    ops::linear_packed_forward(out, in, packed, type, rows, in_dim, out_dim, accumulate);
  }
  void embedding_packed_forward(T* out, const int32_t* tokens, const void* packed,
                                WeightType type, int64_t n, int64_t d, int64_t V) const override {
    ops::embedding_packed_forward(out, tokens, packed, type, n, d, V);
  }
  void embedding_forward(T* out, const int32_t* tokens, const T* table, int64_t n,
                         int64_t d) const override {
    ops::embedding_forward(out, tokens, table, n, d);
  }
  void embedding_backward(T* dtable, const T* dout, const int32_t* tokens, int64_t n, int64_t d,
                          const TokenRows*) const override {
    ops::embedding_backward(dtable, dout, tokens, n, d);
  }
  void rmsnorm_forward(T* out, T* rstd, const T* in, const T* gain, int64_t rows, int64_t d,
                       double eps) const override {
    ops::rmsnorm_forward(out, rstd, in, gain, rows, d, eps);
  }
  void rmsnorm_backward(T* din, T* dgain, const T* dout, const T* in, const T* gain,
                        const T* rstd, int64_t rows, int64_t d) const override {
    ops::rmsnorm_backward(din, dgain, dout, in, gain, rstd, rows, d);
  }
  void rope_forward(T* x, const int32_t* pos, int64_t n, int64_t heads, int64_t head_dim,
                    int64_t row_stride, const T* cos_table, const T* sin_table) const override {
    ops::rope_forward(x, pos, n, heads, head_dim, row_stride, cos_table, sin_table);
  }
  void rope_backward(T* dx, const int32_t* pos, int64_t n, int64_t heads, int64_t head_dim,
                     int64_t row_stride, const T* cos_table, const T* sin_table) const override {
    ops::rope_backward(dx, pos, n, heads, head_dim, row_stride, cos_table, sin_table);
  }
  void swiglu_forward(T* act, const T* gate_up, int64_t rows, int64_t F) const override {
    ops::swiglu_forward(act, gate_up, rows, F);
  }
  void swiglu_backward(T* dgate_up, const T* dact, const T* gate_up, int64_t rows,
                       int64_t F) const override {
    ops::swiglu_backward(dgate_up, dact, gate_up, rows, F);
  }
  void cross_entropy_forward(T* nll, T* lse, const T* logits, const int32_t* targets,
                             int64_t rows, int64_t V) const override {
    ops::cross_entropy_forward(nll, lse, logits, targets, rows, V);
  }
  void top_k_rows(int32_t* ids, T* values, int32_t* first_nonfinite, const T* x, int64_t rows,
                  int64_t n, const uint8_t* banned, int64_t k) const override {
    ops::top_k_rows(ids, values, first_nonfinite, x, rows, n, banned, k);
  }
  void cross_entropy_backward(T* dlogits, const T* logits, const T* lse, const int32_t* targets,
                              const T* dnll, int64_t rows, int64_t V) const override {
    ops::cross_entropy_backward(dlogits, logits, lse, targets, dnll, rows, V);
  }
  int64_t attention_forward(T* out, T* lse, const T* qkv,
                            const AttentionLayout& layout) const override {
    return ops::attention_forward(out, lse, qkv, layout);
  }
  void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* out, const T* lse,
                          const AttentionLayout& layout) const override {
    ops::attention_backward(dqkv, dout, qkv, out, lse, layout);
  }
  void attention_decode(T* out, const T* qkv, const T* persistent_k, const T* persistent_v,
                        const T* ring_k, const T* ring_v,
                        const DecodeAttentionLayout& layout) const override {
    ops::attention_decode(out, qkv, persistent_k, persistent_v, ring_k, ring_v, layout);
  }
  void adamw_update(T* weights, const T* grads, float* m, float* v,
                    const std::vector<AdamWRange>& ranges, const AdamWStep& step) const override {
    ops::adamw_update(weights, grads, m, v, ranges, step);
  }
  double sum_squares(const T* x, int64_t n) const override { return ops::sum_squares(x, n); }

 private:
  bool bf16_;
};

}  // namespace

template <typename T>
const Backend<T>& cpu_backend() {
  static const CpuBackend<T> backend;
  return backend;
}

template const Backend<float>& cpu_backend<float>();
template const Backend<double>& cpu_backend<double>();

const Backend<float>& cpu_backend(Precision precision) {
  if (precision == Precision::fp32) return cpu_backend<float>();
  static const CpuBackend<float> bf16(Precision::bf16);
  return bf16;
}

}  // namespace sps::ops
