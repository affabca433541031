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

// What the CPU backend runs for each op of op_list.h, with its arguments as listed there: the
// function of ops.h of the same name; in bf16 precision (float only) the linears of
// linear_bf16.h.
template <typename T>
struct CpuOpTable {
  bool bf16 = false;

  auto fill(auto x, auto n, auto value) const { std::fill(x, x + n, value); }
  auto copy_rows(auto... a) const { return ops::copy_rows(a...); }
  auto copy_rows_to_bf16(auto... a) const { return ops::copy_rows_to_bf16(a...); }
  auto copy_bf16_rows(auto... a) const { return ops::copy_rows(a...); }
  auto linear_forward(auto... a) const {
    if constexpr (std::is_same_v<T, float>)
      if (bf16) return cpu::linear_forward_bf16(cpu::bf16_gemm_choice().path, a...);
    ops::linear_forward(a...);
  }
  auto linear_backward(auto... a) const {
    if constexpr (std::is_same_v<T, float>)
      if (bf16) return cpu::linear_backward_bf16(cpu::bf16_gemm_choice().path, a...);
    ops::linear_backward(a...);
  }
  // bf16: a decode step's GEMMs on bf16 operands too (as on CUDA), through the same path.
  auto linear_decode_forward(auto... a) const {
    if (bf16) return linear_forward(a..., int64_t{0}, int64_t{0});
    ops::linear_decode_forward(a...);
  }
  auto packed_weight_bytes(auto... a) const { return ops::packed_weight_bytes<T>(a...); }
  auto pack_weight_rows(auto... a) const { return ops::pack_weight_rows(a...); }
  auto linear_packed_forward(auto... a) const { return ops::linear_packed_forward(a...); }
  auto embedding_packed_forward(auto... a) const { return ops::embedding_packed_forward(a...); }
  auto embedding_forward(auto... a) const { return ops::embedding_forward(a...); }
  // The rows are summed in their order: no grouping by token to read.
  auto embedding_backward(auto dtable, auto dout, auto tokens, auto n, auto d,
                          const TokenRows*) const {
    return ops::embedding_backward(dtable, dout, tokens, n, d);
  }
  auto rmsnorm_forward(auto... a) const { return ops::rmsnorm_forward(a...); }
  auto rmsnorm_backward(auto... a) const { return ops::rmsnorm_backward(a...); }
  auto rope_forward(auto... a) const { return ops::rope_forward(a...); }
  auto rope_backward(auto... a) const { return ops::rope_backward(a...); }
  auto swiglu_forward(auto... a) const { return ops::swiglu_forward(a...); }
  auto swiglu_backward(auto... a) const { return ops::swiglu_backward(a...); }
  auto cross_entropy_forward(auto... a) const { return ops::cross_entropy_forward(a...); }
  auto cross_entropy_backward(auto... a) const { return ops::cross_entropy_backward(a...); }
  auto top_k_rows(auto... a) const { return ops::top_k_rows(a...); }
  auto attention_forward(auto... a) const { return ops::attention_forward(a...); }
  auto attention_backward(auto... a) const { return ops::attention_backward(a...); }
  auto attention_decode(auto... a) const { return ops::attention_decode(a...); }
  auto attention_decode_bf16_cache(auto... a) const {
    return ops::attention_decode_bf16_cache(a...);
  }
  auto adamw_update(auto... a) const { return ops::adamw_update(a...); }
  auto sum_squares(auto... a) const { return ops::sum_squares(a...); }
};

template <typename T>
class CpuBackend final : public Backend<T> {
 public:
  explicit CpuBackend(Precision precision = Precision::fp32)
      : op_table_{precision == Precision::bf16} {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
    SPS_ASSERT((!op_table_.bf16 || std::is_same_v<T, float>));
  }
  std::unique_ptr<GemmWeightCopies> gemm_weight_copies(const T* weights, int64_t n) const override {
    if constexpr (std::is_same_v<T, float>)
      if (op_table_.bf16) return cpu::bf16_weight_copies(weights, n);
    return nullptr;
  }
  std::string describe_gemms() const override {
    return op_table_.bf16 ? cpu::bf16_gemm_choice().description : "";
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
  // In bf16 precision the weights keep their rows: the GEMMs read the bf16 copies.
  int64_t packed_panel_rows() const override {
    return op_table_.bf16 ? 0 : ops::packed_panel_rows<T>();
  }

  SPS_BACKEND_OPS(SPS_OVERRIDE_FROM_OP_TABLE)

 private:
  CpuOpTable<T> op_table_;
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
