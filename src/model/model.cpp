#include "model/model.h"

#include <algorithm>
#include <cstring>

#include "ops/ops.h"
#include "util/error.h"

namespace sps {

template <typename T>
Model<T>::Model(const ModelConfig& config)
    : config_(config), family_(family_by_name(config.family)), table_(config) {
  config_.validate("model config");
  weights_.assign(table_.total(), T(0));
  grads_.assign(table_.total(), T(0));
}

template <typename T>
void Model<T>::zero_grads() {
  std::fill(grads_.begin(), grads_.end(), T(0));
}

template <typename T>
void Model<T>::reserve(int64_t B, int64_t T_) {
  if (B <= planned_batch_ && T_ <= planned_tokens_) return;
  B = std::max(B, planned_batch_);
  T_ = std::max(T_, planned_tokens_);
  const int64_t S = family_.streams() * T_;
  const int64_t rows = B * S;
  const int64_t d = config_.hidden_size, F = config_.intermediate_size, H = config_.n_head;
  const int64_t V = config_.vocab_size, L = config_.n_layer;
  const int64_t readout_rows = B * T_;
  // Plan offsets first, then allocate once.
  int64_t total = 0;
  auto take = [&](int64_t n) {
    const int64_t offset = total;
    total += (n + 15) / 16 * 16;  // 64-byte aligned slices for float
    return offset;
  };
  struct Offsets { int64_t h_in, n1, rstd1, qkv, att, lse, h_mid, n2, rstd2, gate_up, act; };
  std::vector<Offsets> layer_offsets(L);
  for (auto& o : layer_offsets) {
    o = {take(rows * d), take(rows * d), take(rows), take(rows * 3 * d), take(rows * d),
         take(rows * H), take(rows * d), take(rows * d), take(rows), take(rows * 2 * F),
         take(rows * F)};
  }
  const int64_t h_out = take(rows * d), nf = take(readout_rows * d), rstdf = take(readout_rows);
  const int64_t logits = take(kLmHeadChunk * V), lse_head = take(readout_rows),
                nll = take(readout_rows);
  const int64_t dh = take(rows * d), dn = take(rows * d), dqkv = take(rows * 3 * d),
                datt = take(rows * d), dgate_up = take(rows * 2 * F), dact = take(rows * F),
                dnf = take(readout_rows * d);
  acts_.assign(total, T(0));
  T* base = acts_.data();
  layer_acts_.resize(L);
  for (int64_t l = 0; l < L; ++l) {
    const Offsets& o = layer_offsets[l];
    layer_acts_[l] = {base + o.h_in, base + o.n1,  base + o.rstd1,   base + o.qkv,
                      base + o.att,  base + o.lse, base + o.h_mid,   base + o.n2,
                      base + o.rstd2, base + o.gate_up, base + o.act};
  }
  h_out_ = base + h_out;
  nf_ = base + nf;
  rstdf_ = base + rstdf;
  logits_ = base + logits;
  lse_head_ = base + lse_head;
  nll_ = base + nll;
  dh_ = base + dh;
  dn_ = base + dn;
  dqkv_ = base + dqkv;
  datt_ = base + datt;
  dgate_up_ = base + dgate_up;
  dact_ = base + dact;
  dnf_ = base + dnf;
  planned_batch_ = B;
  planned_tokens_ = T_;
  const int64_t D = config_.head_dim();
  rope_cos_.assign(T_ * D / 2, T(0));
  rope_sin_.assign(T_ * D / 2, T(0));
  ops::rope_tables(rope_cos_.data(), rope_sin_.data(), T_, D, config_.rope_theta);
  slot_positions_.reserve(rows);
  readout_targets_.reserve(readout_rows);
}

template <typename T>
void Model<T>::release_activations() {
  std::vector<T>().swap(acts_);
  layer_acts_.clear();
  h_out_ = nf_ = rstdf_ = logits_ = lse_head_ = nll_ = nullptr;
  dh_ = dn_ = dqkv_ = datt_ = dgate_up_ = dact_ = dnf_ = nullptr;
  planned_batch_ = planned_tokens_ = 0;
}

template <typename T>
ops::AttentionLayout Model<T>::attention_layout() const {
  ops::AttentionLayout attn;
  attn.batch = batch_;
  attn.tokens = tokens_;
  attn.streams = family_.streams();
  attn.persistent_stream = family_.interleaved ? int64_t(family_.persistent_slot) : 0;
  attn.window = config_.window_size;
  attn.persistent_window = config_.persistent_key_window;
  attn.heads = config_.n_head;
  attn.head_dim = config_.head_dim();
  attn.doc = layout_.doc.data();
  attn.doc_start = layout_.doc_start.data();
  return attn;
}

template <typename T>
StepResult Model<T>::forward(const int32_t* x, const int32_t* y, int64_t B, int64_t T_,
                             const ForwardOptions& options) {
  return run(x, y, B, T_, false, 1.0, options);
}

template <typename T>
StepResult Model<T>::forward_backward(const int32_t* x, const int32_t* y, int64_t B,
                                      int64_t T_, double grad_scale) {
  return run(x, y, B, T_, true, grad_scale, {});
}

template <typename T>
StepResult Model<T>::run(const int32_t* x, const int32_t* y, int64_t B, int64_t T_,
                         bool backward, double grad_scale, const ForwardOptions& options) {
  SPS_ASSERT(T_ <= config_.block_size && B > 0 && T_ > 0);
  reserve(B, T_);  // no-op unless the shape outgrows the plan
  batch_ = B;
  tokens_ = T_;
  build_slot_layout(layout_, x, B, T_, config_, family_);

  const int64_t S = layout_.slots(), rows = B * S;
  const int64_t d = config_.hidden_size, F = config_.intermediate_size;
  const int64_t H = config_.n_head, D = config_.head_dim();
  const T* W = weights_.data();

  slot_positions_.resize(rows);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s) slot_positions_[b * S + s] = layout_.positions[b * T_ + s % T_];

  const ops::AttentionLayout attn = attention_layout();

  StepResult result;
  result.kept = layout_.kept;
  const int32_t* pos = slot_positions_.data();

  ops::embedding_forward(layer_acts_[0].h_in, layout_.slot_tokens.data(), W + table_.wte(),
                         rows, d);
  for (int64_t l = 0; l < config_.n_layer; ++l) {
    const LayerParams& p = table_.layer(l);
    LayerActs& a = layer_acts_[l];
    // Attention half: h_mid = h_in + c_proj(Attn(RoPE(c_attn(RMSNorm(h_in)))))
    ops::rmsnorm_forward(a.n1, a.rstd1, a.h_in, W + p.attention_norm, rows, d, config_.norm_eps);
    ops::linear_forward(a.qkv, a.n1, W + p.c_attn, rows, d, 3 * d, false);
    ops::rope_forward(a.qkv, pos, rows, H, D, 3 * d, rope_cos_.data(), rope_sin_.data());
    ops::rope_forward(a.qkv + d, pos, rows, H, D, 3 * d, rope_cos_.data(), rope_sin_.data());
    result.attention_pairs += ops::attention_forward(a.att, a.lse, a.qkv, attn);
    std::memcpy(a.h_mid, a.h_in, sizeof(T) * rows * d);
    ops::linear_forward(a.h_mid, a.att, W + p.c_proj, rows, d, d, true);
    // MLP half: h_out = h_mid + down(silu(gate(n2)) ⊙ up(n2)); gate|up is one [2F, d] weight.
    ops::rmsnorm_forward(a.n2, a.rstd2, a.h_mid, W + p.mlp_norm, rows, d, config_.norm_eps);
    ops::linear_forward(a.gate_up, a.n2, W + p.gate_proj, rows, d, 2 * F, false);
    ops::swiglu_forward(a.act, a.gate_up, rows, F);
    T* h_next = l + 1 < config_.n_layer ? layer_acts_[l + 1].h_in : h_out_;
    std::memcpy(h_next, a.h_mid, sizeof(T) * rows * d);
    ops::linear_forward(h_next, a.act, W + p.down_proj, rows, F, d, true);
  }

  lm_head(y, backward, grad_scale, result, options);
  if (backward) backward_layers();
  return result;
}

// Output norm and tied LM head on the readout slots only, in chunks of rows so the logits
// buffer stays [chunk, V]. With backward, each chunk's logits are turned into their
// gradient at once, so logits are never recomputed.
template <typename T>
void Model<T>::lm_head(const int32_t* y, bool backward, double grad_scale, StepResult& result,
                       const ForwardOptions& options) {
  const int64_t B = batch_, T_ = tokens_, S = layout_.slots();
  const int64_t d = config_.hidden_size, V = config_.vocab_size;
  const int64_t readout_stream = family_.interleaved ? int64_t(family_.readout_slot) : 0;
  const T* W = weights_.data();
  const T* E = W + table_.wte();
  for (int64_t b = 0; b < B; ++b) {
    const T* rows_in = h_out_ + (b * S + readout_stream * T_) * d;
    ops::rmsnorm_forward(nf_ + b * T_ * d, rstdf_ + b * T_, rows_in, W + table_.output_norm(),
                         T_, d, config_.norm_eps);
  }
  readout_targets_.assign(y, y + B * T_);
  const T row_grad = layout_.kept > 0 ? T(grad_scale / double(layout_.kept)) : T(0);
  for (int64_t r0 = 0; r0 < B * T_; r0 += kLmHeadChunk) {
    const int64_t n = std::min(kLmHeadChunk, B * T_ - r0);
    ops::linear_forward(logits_, nf_ + r0 * d, E, n, d, V, false);
    ops::cross_entropy_forward(nll_ + r0, lse_head_ + r0, logits_, readout_targets_.data() + r0,
                               n, V);
    if (options.logits)
      for (int64_t k = 0; k < n * V; ++k) options.logits[r0 * V + k] = double(logits_[k]);
    for (int64_t r = r0; r < r0 + n; ++r) {
      if (options.nll) options.nll[r] = double(nll_[r]);
      if (layout_.keep[r]) result.nll_sum += double(nll_[r]);
    }
    if (!backward) continue;
    T* dnll = dgate_up_;  // free until the layers' backward starts
    for (int64_t k = 0; k < n; ++k) dnll[k] = layout_.keep[r0 + k] ? row_grad : T(0);
    ops::cross_entropy_backward(logits_, logits_, lse_head_ + r0, readout_targets_.data() + r0,
                                dnll, n, V);
    ops::linear_backward(dnf_ + r0 * d, grads_.data() + table_.wte(), logits_, nf_ + r0 * d, E,
                         n, d, V, false);
  }
  result.loss = layout_.kept > 0 ? result.nll_sum / double(layout_.kept) : 0.0;
}

template <typename T>
void Model<T>::backward_layers() {
  const int64_t B = batch_, T_ = tokens_, S = layout_.slots(), rows = B * S;
  const int64_t d = config_.hidden_size, F = config_.intermediate_size;
  const int64_t H = config_.n_head, D = config_.head_dim();
  const int64_t readout_stream = family_.interleaved ? int64_t(family_.readout_slot) : 0;
  const T* W = weights_.data();
  T* G = grads_.data();
  const int32_t* pos = slot_positions_.data();

  const ops::AttentionLayout attn = attention_layout();

  // dh: gradient of the residual stream, [B·S, d]; only readout rows get the head's.
  std::fill(dh_, dh_ + rows * d, T(0));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t row0 = b * S + readout_stream * T_;
    ops::rmsnorm_backward(dh_ + row0 * d, G + table_.output_norm(), dnf_ + b * T_ * d,
                          h_out_ + row0 * d, W + table_.output_norm(), rstdf_ + b * T_, T_, d);
  }
  for (int64_t l = config_.n_layer - 1; l >= 0; --l) {
    const LayerParams& p = table_.layer(l);
    const LayerActs& a = layer_acts_[l];
    // MLP half.
    ops::linear_backward(dact_, G + p.down_proj, dh_, a.act, W + p.down_proj, rows, F, d, false);
    ops::swiglu_backward(dgate_up_, dact_, a.gate_up, rows, F);
    ops::linear_backward(dn_, G + p.gate_proj, dgate_up_, a.n2, W + p.gate_proj, rows, d, 2 * F,
                         false);
    ops::rmsnorm_backward(dh_, G + p.mlp_norm, dn_, a.h_mid, W + p.mlp_norm, a.rstd2, rows, d);
    // Attention half.
    ops::linear_backward(datt_, G + p.c_proj, dh_, a.att, W + p.c_proj, rows, d, d, false);
    ops::attention_backward(dqkv_, datt_, a.qkv, a.att, a.lse, attn);
    ops::rope_backward(dqkv_, pos, rows, H, D, 3 * d, rope_cos_.data(), rope_sin_.data());
    ops::rope_backward(dqkv_ + d, pos, rows, H, D, 3 * d, rope_cos_.data(), rope_sin_.data());
    ops::linear_backward(dn_, G + p.c_attn, dqkv_, a.n1, W + p.c_attn, rows, d, 3 * d, false);
    ops::rmsnorm_backward(dh_, G + p.attention_norm, dn_, a.h_in, W + p.attention_norm, a.rstd1,
                          rows, d);
  }
  ops::embedding_backward(G + table_.wte(), dh_, layout_.slot_tokens.data(), rows, d);
}

template class Model<float>;
template class Model<double>;

}  // namespace sps
