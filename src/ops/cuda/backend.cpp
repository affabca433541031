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

class CudaBackend final : public Backend<float> {
 public:
  CudaBackend(int index, Precision precision)
      : index_(index), operands_(precision) {}

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
  void fill(float* x, int64_t n, float value) const override { cuda::fill(x, n, value); }
  void copy_rows(float* dst, const float* src, const int64_t* to, const int64_t* from, int64_t n,
                 int64_t width) const override {
    cuda::copy_rows(dst, src, to, from, n, width);
  }

  void linear_forward(float* out, const float* in, const float* weight, int64_t rows,
                      int64_t in_dim, int64_t out_dim, bool accumulate, int64_t ld_in,
                      int64_t ld_out) const override {
    cuda::linear_forward(out, in, weight, rows, in_dim, out_dim, accumulate, ld_in, ld_out,
                         operands_);
  }
  void linear_backward(float* din, float* dweight, const float* dout, const float* in,
                       const float* weight, int64_t rows, int64_t in_dim, int64_t out_dim,
                       bool accumulate_din, int64_t ld_in, int64_t ld_dout) const override {
    cuda::linear_backward(din, dweight, dout, in, weight, rows, in_dim, out_dim, accumulate_din,
                          ld_in, ld_dout, operands_);
  }
  void linear_decode_forward(float* out, const float* in, const float* weight, int64_t rows,
                             int64_t in_dim, int64_t out_dim, bool accumulate) const override {
    cuda::linear_forward(out, in, weight, rows, in_dim, out_dim, accumulate, 0, 0, operands_);
  }
  // Weights stay in the row layout that cuBLASLt reads: no packed layout.
  void embedding_forward(float* out, const int32_t* tokens, const float* table, int64_t n,
                         int64_t d) const override {
    cuda::embedding_forward(out, tokens, table, n, d);
  }
  int64_t embedding_run_rows() const override { return kEmbeddingRunRows; }
  void embedding_backward(float* dtable, const float* dout, const int32_t* tokens, int64_t n,
                          int64_t d, const TokenRows* by_token) const override {
    SPS_ASSERT(by_token);
    cuda::embedding_backward(dtable, dout, tokens, n, d, *by_token);
  }
  void rmsnorm_forward(float* out, float* rstd, const float* in, const float* gain, int64_t rows,
                       int64_t d, double eps) const override {
    cuda::rmsnorm_forward(out, rstd, in, gain, rows, d, eps);
  }
  void rmsnorm_backward(float* din, float* dgain, const float* dout, const float* in,
                        const float* gain, const float* rstd, int64_t rows,
                        int64_t d) const override {
    cuda::rmsnorm_backward(din, dgain, dout, in, gain, rstd, rows, d);
  }
  void rope_forward(float* x, const int32_t* pos, int64_t n, int64_t heads, int64_t head_dim,
                    int64_t row_stride, const float* cos_table,
                    const float* sin_table) const override {
    cuda::rope_forward(x, pos, n, heads, head_dim, row_stride, cos_table, sin_table);
  }
  void rope_backward(float* dx, const int32_t* pos, int64_t n, int64_t heads, int64_t head_dim,
                     int64_t row_stride, const float* cos_table,
                     const float* sin_table) const override {
    cuda::rope_backward(dx, pos, n, heads, head_dim, row_stride, cos_table, sin_table);
  }
  void swiglu_forward(float* act, const float* gate_up, int64_t rows, int64_t F) const override {
    cuda::swiglu_forward(act, gate_up, rows, F);
  }
  void swiglu_backward(float* dgate_up, const float* dact, const float* gate_up, int64_t rows,
                       int64_t F) const override {
    cuda::swiglu_backward(dgate_up, dact, gate_up, rows, F);
  }
  void cross_entropy_forward(float* nll, float* lse, const float* logits, const int32_t* targets,
                             int64_t rows, int64_t V) const override {
    cuda::cross_entropy_forward(nll, lse, logits, targets, rows, V);
  }
  void top_k_rows(int32_t* ids, float* values, int32_t* first_nonfinite, const float* x,
                  int64_t rows, int64_t n, const uint8_t* banned, int64_t k) const override {
    cuda::top_k_rows(ids, values, first_nonfinite, x, rows, n, banned, k);
  }
  void cross_entropy_backward(float* dlogits, const float* logits, const float* lse,
                              const int32_t* targets, const float* dnll, int64_t rows,
                              int64_t V) const override {
    cuda::cross_entropy_backward(dlogits, logits, lse, targets, dnll, rows, V);
  }
  int64_t attention_tile() const override { return kAttentionTile; }
  int64_t attention_forward(float* out, float* lse, const float* qkv,
                            const AttentionLayout& layout) const override {
    return cuda::attention_forward(out, lse, qkv, layout, operands_);
  }
  void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                          const float* lse, const AttentionLayout& layout) const override {
    cuda::attention_backward(dqkv, dout, qkv, out, lse, layout, operands_);
  }
  void attention_decode(float* out, const float* qkv, const float* persistent_k,
                        const float* persistent_v, const float* ring_k, const float* ring_v,
                        const DecodeAttentionLayout& layout) const override {
    cuda::attention_decode(out, qkv, persistent_k, persistent_v, ring_k, ring_v, layout);
  }
  void adamw_update(float* weights, const float* grads, float* m, float* v,
                    const std::vector<AdamWRange>& ranges, const AdamWStep& step) const override {
    cuda::adamw_update(weights, grads, m, v, ranges, step);
  }
  double sum_squares(const float* x, int64_t n) const override { return cuda::sum_squares(x, n); }
  std::vector<double> time_gemm(float* out, const float* a, const float* b, int64_t n,
                                int repeats) const override {
    return cuda::time_gemm(out, a, b, n, repeats, operands_);
  }

 private:
  int index_;
  Precision operands_;
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
