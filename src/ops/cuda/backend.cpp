#include "ops/cuda/backend.h"

#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "ops/cuda/attention_tiled.h"
#include "ops/cuda/check.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/linear.h"
#include "ops/cuda/memory.h"
#include "ops/cuda/nccl_all_reduce.h"
#include "util/error.h"

namespace sps::ops::cuda {

namespace {

// What the CUDA backend runs for each op of op_list.h, with its arguments as listed there:
// the function of that name of kernels.h, linear.h (cuBLASLt) or memory.h; the GEMMs and the
// attention on the backend's operands.
struct CudaOpTable {
  Precision operands;

  auto fill(auto... a) const { return cuda::fill(a...); }
  auto copy_rows(auto... a) const { return cuda::copy_rows(a...); }
  auto linear_forward(auto... a) const { return cuda::linear_forward(a..., operands); }
  auto linear_backward(auto... a) const { return cuda::linear_backward(a..., operands); }
  // cuBLASLt picks its own kernels for a decode step's few rows.
  auto linear_decode_forward(auto... a) const {
    return cuda::linear_forward(a..., int64_t{0}, int64_t{0}, operands);
  }
  // Weights stay in the row layout that cuBLASLt reads: no packed layout (packed_panel_rows()
  // is 0), so the model never calls these.
  int64_t packed_weight_bytes(auto...) const { return 0; }
  void pack_weight_rows(auto...) const { SPS_ASSERT(!"this backend packs no weights"); }
  void linear_packed_forward(auto...) const { SPS_ASSERT(!"this backend packs no weights"); }
  void embedding_packed_forward(auto...) const { SPS_ASSERT(!"this backend packs no weights"); }
  auto embedding_forward(auto... a) const { return cuda::embedding_forward(a...); }
  auto embedding_backward(auto dtable, auto dout, auto tokens, auto n, auto d,
                          const TokenRows* by_token) const {
    SPS_ASSERT(by_token);
    return cuda::embedding_backward(dtable, dout, tokens, n, d, *by_token);
  }
  auto rmsnorm_forward(auto... a) const { return cuda::rmsnorm_forward(a...); }
  auto rmsnorm_backward(auto... a) const { return cuda::rmsnorm_backward(a...); }
  auto rope_forward(auto... a) const { return cuda::rope_forward(a...); }
  auto rope_backward(auto... a) const { return cuda::rope_backward(a...); }
  auto swiglu_forward(auto... a) const { return cuda::swiglu_forward(a...); }
  auto swiglu_backward(auto... a) const { return cuda::swiglu_backward(a...); }
  auto cross_entropy_forward(auto... a) const { return cuda::cross_entropy_forward(a...); }
  auto cross_entropy_backward(auto... a) const { return cuda::cross_entropy_backward(a...); }
  auto top_k_rows(auto... a) const { return cuda::top_k_rows(a...); }
  auto attention_forward(auto... a) const { return cuda::attention_forward(a..., operands); }
  auto attention_backward(auto... a) const { return cuda::attention_backward(a..., operands); }
  auto attention_decode(auto... a) const { return cuda::attention_decode(a...); }
  // The KV cache stays fp32 here (capabilities().bf16_kv_cache is false): never called.
  void copy_rows_to_bf16(auto...) const { SPS_ASSERT(!"this backend keeps an fp32 KV cache"); }
  void copy_bf16_rows(auto...) const { SPS_ASSERT(!"this backend keeps an fp32 KV cache"); }
  void attention_decode_bf16_cache(auto...) const {
    SPS_ASSERT(!"this backend keeps an fp32 KV cache");
  }
  auto adamw_update(auto... a) const { return cuda::adamw_update(a...); }
  auto sum_squares(auto... a) const { return cuda::sum_squares(a...); }
};

class CudaBackend final : public Backend<float> {
 public:
  using T = float;  // the element type of op_list.h

  CudaBackend(int index, Precision precision) : index_(index), op_table_{precision} {}

  Device device() const override { return {"cuda", index_}; }
  void use_on_this_thread() const override { use_device(index_); }
  bool host_accessible() const override { return false; }
  void* allocate(size_t bytes) const override { return device_allocate(bytes); }
  void release(void* pointer) const override { device_free(pointer); }
  void copy(void* to, const void* from, size_t bytes) const override {
    copy_on_device(to, from, bytes);
  }
  void upload(void* to, const void* host, size_t bytes) const override {
    copy_to_device(to, host, bytes);
  }
  void download(void* host, const void* from, size_t bytes) const override {
    copy_to_host(host, from, bytes);
  }
  int64_t available_bytes() const override { return free_device_bytes(); }
  std::unique_ptr<DeviceAllReduce> device_all_reduce(const JobLink& job,
                                                     std::string* why) const override {
    return make_nccl_all_reduce(job, why);
  }
  int64_t embedding_run_rows() const override { return kEmbeddingRunRows; }
  int64_t attention_tile() const override { return kAttentionTile; }

  SPS_BACKEND_OPS(SPS_OVERRIDE_FROM_OP_TABLE)

  std::vector<double> time_gemm(float* out, const float* a, const float* b, int64_t n,
                                int repeats) const override {
    return cuda::time_gemm(out, a, b, n, repeats, op_table_.operands);
  }

 private:
  int index_;
  CudaOpTable op_table_;
};

}  // namespace

const Backend<float>& backend(int index, Precision precision) {
  static std::mutex mutex;
  static std::map<std::pair<int, Precision>, std::unique_ptr<CudaBackend>> backends;
  static int used = -1;
  const std::lock_guard<std::mutex> lock(mutex);
  // The cuBLASLt handle, workspaces and scratch buffers are one per process, on one GPU.
  if (used >= 0 && used != index) fail_second_device(index, used);
  used = index;
  use_device(index);
  auto& slot = backends[{index, precision}];
  if (!slot) slot = std::make_unique<CudaBackend>(index, precision);
  return *slot;
}

}  // namespace sps::ops::cuda
