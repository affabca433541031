#include "train/optimizer.h"

#include <cmath>
#include <map>

#include "ops/ops.h"
#include "util/error.h"
#include "util/safetensors.h"

namespace sps {

double scheduled_learning_rate(int64_t step, int64_t tokens_per_step, int64_t max_tokens,
                               const OptimizerSettings& o, const SchedulerSettings& s) {
  const double peak = o.learning_rate;
  if (!s.decay_lr) return peak;
  const int64_t n = (step == 0 ? 1 : step) * tokens_per_step;
  if (n < s.warmup_tokens) return peak * double(n) / double(s.warmup_tokens);
  const int64_t decay_start = max_tokens - s.lr_decay_tokens;
  if (n < decay_start) return peak;
  if (n >= max_tokens) return s.min_lr;
  const double progress = double(n - decay_start) / double(s.lr_decay_tokens);
  return s.min_lr + (1.0 - progress) * (peak - s.min_lr);
}

double clip_coefficient(double grad_norm, double max_norm) {
  if (max_norm <= 0) return 1.0;
  const double coefficient = max_norm / (grad_norm + 1e-6);
  return coefficient < 1.0 ? coefficient : 1.0;
}

template <typename T>
double global_grad_norm(const ops::Backend<T>& backend, const T* grads, int64_t n) {
  return std::sqrt(backend.sum_squares(grads, n));
}

namespace {

// The parameters as ranges for adamw_update: runs of neighbouring entries with the same
// decay flag merged into one.
std::vector<ops::AdamWRange> update_ranges(const ParamTable& table) {
  std::vector<ops::AdamWRange> ranges;
  for (const auto& e : table.entries()) {
    if (!ranges.empty() && ranges.back().decayed == e.decayed && ranges.back().end == e.offset)
      ranges.back().end += e.numel;
    else
      ranges.push_back({e.offset, e.offset + e.numel, e.decayed});
  }
  return ranges;
}

}  // namespace

AdamW::AdamW(const ParamTable& table, const OptimizerSettings& settings,
             const ops::Backend<float>& backend)
    : table_(table), settings_(settings), ranges_(update_ranges(table)), m_(backend), v_(backend) {
  for (ops::DeviceBuffer<float>* moment : {&m_, &v_}) {
    moment->reset(size_t(table.total()));
    backend.fill(moment->data(), table.total(), 0.0f);
  }
}

void AdamW::set_moments(const std::vector<float>& exp_avg, const std::vector<float>& exp_avg_sq) {
  const size_t n = size_t(table_.total());
  SPS_ASSERT(exp_avg.size() == n && exp_avg_sq.size() == n);
  m_.upload(exp_avg.data(), n);
  v_.upload(exp_avg_sq.data(), n);
}

template <typename T>
void AdamW::update(const ops::Backend<T>& backend, T* weights, const T* grads, double lr,
                   double grad_scale) {
  ++step_;
  ops::AdamWStep s;
  s.lr = lr;
  s.beta1 = settings_.beta1;
  s.beta2 = settings_.beta2;
  s.eps = settings_.eps;
  s.grad_scale = grad_scale;
  s.step = step_;
  s.weight_decay = settings_.weight_decay;
  backend.adamw_update(weights, grads, m_.data(), v_.data(), ranges_, s);
}

void AdamW::save(const std::string& path) const {
  const size_t n = size_t(table_.total());
  ops::on_host(m_.memory(), m_.data(), n, ops::HostAccess::read, [&](const float* host_m) {
    ops::on_host(v_.memory(), v_.data(), n, ops::HostAccess::read, [&](const float* host_v) {
      std::vector<TensorToWrite> tensors;
      for (const auto& e : table_.entries()) {
        tensors.push_back({e.name + ".exp_avg", DType::F32, e.shape, host_m + e.offset});
        tensors.push_back({e.name + ".exp_avg_sq", DType::F32, e.shape, host_v + e.offset});
      }
      write_safetensors(path, tensors,
                        {{"format", "sps-adamw"}, {"step", std::to_string(step_)}});
    });
  });
}

bool AdamW::load(const std::string& path) {
  SafetensorsFile file(path);
  if (file.header().tensors.size() != 2 * table_.entries().size())
    fail("{}: {} tensors, expected {} (exp_avg and exp_avg_sq of every parameter)", path,
         file.header().tensors.size(), 2 * table_.entries().size());
  const size_t n = size_t(table_.total());
  // Read and checked into the moments themselves on the CPU, into host copies elsewhere.
  ops::on_host(m_.memory(), m_.data(), n, ops::HostAccess::write, [&](float* host_m) {
    ops::on_host(v_.memory(), v_.data(), n, ops::HostAccess::write, [&](float* host_v) {
      for (const auto& e : table_.entries()) {
        for (const bool second : {false, true}) {
          const std::string name = e.name + (second ? ".exp_avg_sq" : ".exp_avg");
          const TensorInfo* info = file.find(name);
          if (!info) fail("{}: missing tensor '{}'", path, name);
          if (info->dtype != DType::F32 || info->shape != e.shape)
            fail("{}: tensor '{}' is not F32 of the parameter's shape", path, name);
          float* out = (second ? host_v : host_m) + e.offset;
          file.read_into(name, out);  // verifies the tensor's checksum
          for (int64_t k = 0; k < e.numel; ++k)
            if (!std::isfinite(out[k]) || (second && out[k] < 0))
              fail("{}: tensor '{}' holds {} at index {}, not a{} finite moment", path, name,
                   out[k], k, second ? " non-negative" : "");
        }
      }
    });
  });
  const auto it = file.header().metadata.find("step");
  if (it == file.header().metadata.end()) fail("{}: no 'step' in the metadata", path);
  try {
    step_ = std::stoll(it->second);
  } catch (const std::exception&) {
    fail("{}: metadata 'step' is not a number: '{}'", path, it->second);
  }
  return file.has_checksums();
}

template double global_grad_norm<float>(const ops::Backend<float>&, const float*, int64_t);
template double global_grad_norm<double>(const ops::Backend<double>&, const double*, int64_t);
template void AdamW::update<float>(const ops::Backend<float>&, float*, const float*, double,
                                   double);
template void AdamW::update<double>(const ops::Backend<double>&, double*, const double*, double,
                                    double);

}  // namespace sps
