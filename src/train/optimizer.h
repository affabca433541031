#pragma once
// The paper's optimisation recipe (docs/model.md §6): the token-based learning-rate schedule, global
// gradient-norm clipping and AdamW with decoupled weight decay on ≥2-D tensors only. The
// element-wise work runs in the backend's adamw_update / sum_squares, and the moments live in
// its memory, so a GPU run uses this file unchanged.
#include <cstdint>
#include <string>
#include <vector>

#include "model/params.h"
#include "ops/backend.h"
#include "train/train_config.h"

namespace sps {

// The learning rate of step `step` (0-based). n = step·tokens_per_step, with step 0
// counted as step 1; then n < warmup → peak·n/warmup; n < max − decay → peak; n ≥ max →
// min_lr; else min_lr + (1 − (n − (max − decay))/decay)·(peak − min_lr). Without decay_lr
// the peak rate throughout.
double scheduled_learning_rate(int64_t step, int64_t tokens_per_step, int64_t max_tokens,
                               const OptimizerSettings& optimizer,
                               const SchedulerSettings& scheduler);

// The factor gradients are multiplied by: min(1, max_norm / (norm + 1e-6)) as PyTorch's
// clip_grad_norm_; 1 when max_norm is 0 (clipping off).
double clip_coefficient(double grad_norm, double max_norm);

// √Σ g² over the whole flat gradient buffer (the backend's memory).
template <typename T>
double global_grad_norm(const ops::Backend<T>& backend, const T* grads, int64_t n);

class AdamW {
 public:
  // The moments start at zero, in `backend`'s memory (the model's backend).
  AdamW(const ParamTable& table, const OptimizerSettings& settings,
        const ops::Backend<float>& backend = ops::cpu_backend<float>());

  // One update of every parameter with gradients · grad_scale (the clip factor) at `lr`, on
  // `backend` (whose memory holds the weights, gradients and moments). Decay applies to the
  // entries marked `decayed` (≥2-D tensors).
  template <typename T>
  void update(const ops::Backend<T>& backend, T* weights, const T* grads, double lr,
              double grad_scale);

  int64_t step() const { return step_; }  // updates done so far
  void set_step(int64_t step) { step_ = step; }
  // The moments in the backend's memory, [P] each in ParamTable order.
  float* exp_avg() { return m_.data(); }
  float* exp_avg_sq() { return v_.data(); }
  // Both moments from the host, [P] each.
  void set_moments(const std::vector<float>& exp_avg, const std::vector<float>& exp_avg_sq);

  // optimizer.safetensors: per parameter `NAME.exp_avg` and `NAME.exp_avg_sq` (F32, the
  // parameter's shape) and the update count in the metadata ("step"). Loading checks every
  // name, shape and checksum; a mismatch is a UserError naming the file. It returns whether
  // the file had checksums to verify (those written before sps recorded them have none).
  void save(const std::string& path) const;
  bool load(const std::string& path);

 private:
  const ParamTable& table_;
  OptimizerSettings settings_;
  std::vector<ops::AdamWRange> ranges_;  // the parameters, as adamw_update takes them
  ops::DeviceBuffer<float> m_, v_;
  int64_t step_ = 0;
};

}  // namespace sps
