#include "model/decoder.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "ops/decode_keys.h"
#include "util/error.h"

namespace sps {

namespace {
// Positions of new tokens the RoPE tables cover beyond the prompts at first.
constexpr int64_t kRopeGrowth = 4096;
}  // namespace

template <typename T>
__int128 Decoder<T>::memory_bytes(const Model<T>& model, const DecoderShape& shape) {
  const ModelConfig& c = model.config();
  const Family& family = model.family();
  const __int128 longest = shape.max_prompt_tokens + shape.max_new_tokens;
  const __int128 ring =
      family.interleaved && c.window_size > 0 ? std::min<__int128>(c.window_size, longest) : 0;
  const __int128 B = shape.batch, tokens = B * shape.max_chunk_tokens;
  const __int128 rows = tokens * family.streams(), d = c.hidden_size;
  const __int128 cache_values = __int128(c.n_layer) * B * (longest + ring) * c.hidden_size * 2;
  const __int128 cache_bytes = cache_values * (model.kv_type() == KvType::bf16 ? 2 : sizeof(T));
  // The model's RoPE tables grown to `longest` positions: cos and sin, D/2 each per position.
  const __int128 rope = longest * c.head_dim();
  const __int128 step = rows * (6 * d + 3 * c.intermediate_size + 3) + tokens * (d + 1 + c.vocab_size);
  return cache_bytes + (2 * rope + step) * sizeof(T);  // the RoPE tables' host copies too
}

template <typename T>
Decoder<T>::Decoder(Model<T>& model, const DecoderShape& shape)
    : model_(model), backend_(model.backend()), shape_(shape), cache_(model.backend()) {
  const ModelConfig& c = model.config();
  const Family& family = model.family();
  SPS_ASSERT(shape.batch > 0 && shape.max_prompt_tokens > 0 && shape.max_new_tokens >= 0);
  SPS_ASSERT(shape.max_chunk_tokens >= 1);
  SPS_ASSERT(shape.prefill_rows >= 0);
  Q_ = family.streams();
  V_ = c.vocab_size;
  d_ = c.hidden_size;
  F_ = c.intermediate_size;
  H_ = c.n_head;
  D_ = c.head_dim();
  L_ = c.n_layer;
  persistent_stream_ = family.persistent_stream();
  window_stream_ = 1 - persistent_stream_;
  readout_stream_ = family.readout_stream();

  // A document never holds more than the longest prompt plus the tokens fed after it, and
  // no position exceeds that count either.
  const int64_t longest = shape.max_prompt_tokens + shape.max_new_tokens;
  KvCacheShape cache_shape;
  cache_shape.type = model.kv_type();
  cache_shape.layers = L_;
  cache_shape.batch = shape.batch;
  cache_shape.heads = H_;
  cache_shape.head_dim = D_;
  cache_shape.persistent_capacity = longest;
  cache_shape.ring_capacity =
      family.interleaved && c.window_size > 0 ? std::min(c.window_size, longest) : 0;
  // Everything allocated below, checked at once, so a shape that cannot fit is one line
  // (needed vs available) instead of a failed allocation.
  backend_.require(memory_bytes(model, shape),
                   fmt::format("the KV cache and decode buffers of {} rows × {} positions",
                               shape.batch, longest));
  cache_.allocate(cache_shape);

  // RoPE tables for the prompts and a first stretch of new tokens; extend() grows them as
  // positions come (a generation of a million tokens that stops early computes few).
  max_positions_ = longest;
  model_.cover_rope_positions(std::min(longest, shape.max_prompt_tokens + kRopeGrowth));

  const int64_t B = shape.batch, rows = B * shape.max_chunk_tokens * Q_;
  step_inputs_host_.assign(size_t(2 * rows), 0);
  step_inputs_.reset(size_t(2 * rows));
  step_counts_host_.assign(size_t(3 * B), 0);
  step_counts_.reset(size_t(3 * B));
  // A step's readout rows: row i of the last layer's h and att is row i·Q + readout_stream_
  // (the same offsets for every step, uploaded once).
  if (Q_ == 2) {
    const int64_t readout_rows = B * shape.max_chunk_tokens;
    readout_.reset(size_t(2 * readout_rows * d_));
    std::vector<int64_t> offsets(size_t(2 * readout_rows));
    for (int64_t i = 0; i < readout_rows; ++i) {
      offsets[i] = i * d_;
      offsets[readout_rows + i] = (i * Q_ + readout_stream_) * d_;
    }
    readout_offsets_.upload(offsets.data(), offsets.size());
  }
  h_.reset(size_t(rows * d_));
  n_.reset(size_t(rows * d_));
  rstd_.reset(size_t(rows));
  qkv_.reset(size_t(rows * 3 * d_));
  att_.reset(size_t(rows * d_));
  gate_up_.reset(size_t(rows * 2 * F_));
  act_.reset(size_t(rows * F_));
  nf_.reset(size_t(B * shape.max_chunk_tokens * d_));
  rstdf_.reset(size_t(B * shape.max_chunk_tokens));
  logits_.reset(size_t(B * shape.max_chunk_tokens * V_));
  ring_next_.assign(B, 0);
  next_position_.assign(B, 0);
  last_token_.assign(B, -1);
}

template <typename T>
void Decoder<T>::prefill(const int32_t* prompts, int64_t P,
                         const std::function<void()>& between_layers) {
  const ModelConfig& c = model_.config();
  const int64_t B = shape_.batch;
  SPS_ASSERT(P > 0 && P <= shape_.max_prompt_tokens && P <= c.block_size);
  build_slot_layout(prompt_layout_, prompts, B, P, c, model_.family());
  cache_.clear_all();
  last_step_pairs_ = 0;
  const T* W = std::as_const(model_).weights();  // const: reading marks no change
  const int64_t rows_per_forward = shape_.prefill_rows > 0
                                       ? shape_.prefill_rows
                                       : std::max<int64_t>(1, kPrefillSlots / (Q_ * P));
  const int64_t group = std::min(B, rows_per_forward);
  const int64_t S = Q_ * P;
  const int64_t ring_capacity = cache_.shape().ring_capacity;
  for (int64_t b0 = 0; b0 < B; b0 += group) {
    const int64_t n = std::min(group, B - b0);
    // Each row's cache takes its last document: prompt tokens [start, P) of the persistent
    // stream, and the last ring_capacity of them of the windowed stream. A prompt ending in
    // EOS ends its document: the next step starts from an empty cache.
    // Slot s of the group's forward is sequence b0 + s / S, row s % S (stream-major).
    std::vector<int64_t> start(n), ring_start(n);
    cache_.clear_writes();
    for (int64_t b = b0; b < b0 + n; ++b) {
      const int64_t last = b * P + P - 1;
      SPS_ASSERT(prompts[last] != c.pad_token_id);
      next_position_[b] = prompt_layout_.positions[last] + 1;
      last_token_[b] = prompts[last];
      start[b - b0] = prompts[last] == c.eos_token_id ? P : prompt_layout_.doc_start[last];
      ring_start[b - b0] = std::max(start[b - b0], P - ring_capacity);
      for (int64_t i = start[b - b0]; i < P; ++i)
        cache_.plan_persistent_write(b, i - start[b - b0],
                                     (b - b0) * S + persistent_stream_ * P + i);
      for (int64_t i = ring_start[b - b0]; ring_capacity > 0 && i < P; ++i)
        cache_.plan_ring_write(b, i - ring_start[b - b0], (b - b0) * S + window_stream_ * P + i);
    }
    ForwardOptions blocks_only;
    blocks_only.blocks_only = true;
    blocks_only.after_layer = [&](int64_t l) {
      cache_.write_layer(l, model_.layer_qkv(l));
      if (between_layers && (l + 1 < L_ || b0 + n < B)) between_layers();
    };
    model_.forward(prompts + b0 * P, nullptr, n, P, blocks_only);
    // Each row's last readout slot, gathered into h_ (free until the first step), then
    // normed together.
    std::vector<int64_t> offsets(size_t(2 * n));
    for (int64_t b = b0; b < b0 + n; ++b) {
      cache_.set_lengths(b, P - start[b - b0], ring_capacity > 0 ? P - ring_start[b - b0] : 0);
      offsets[b - b0] = (b - b0) * d_;
      offsets[n + b - b0] = ((b - b0) * S + readout_stream_ * P + P - 1) * d_;
    }
    prefill_offsets_.upload(offsets.data(), offsets.size());
    backend_.copy_rows(h_.data(), model_.final_hidden(), prefill_offsets_.data(),
                       prefill_offsets_.data() + n, n, d_);
    backend_.rmsnorm_forward(nf_.data() + b0 * d_, rstdf_.data() + b0, h_.data(),
                             W + model_.params().output_norm(), n, d_, c.norm_eps);
  }
  model_.block_linear(logits_.data(), nf_.data(), model_.params().wte(), B, d_, V_, false, true);
  logit_positions_ = 1;
  logits_changed(B);
}

template <typename T>
void Decoder<T>::logits_changed(int64_t rows) {
  logits_held_ = rows;
  host_rows_ = 0;
}

template <typename T>
const T* Decoder<T>::logits() const {
  if (backend_.host_accessible()) return logits_.data();
  if (host_rows_ < logits_held_) {
    host_logits_.resize(logits_.size());
    logits_.download(host_logits_.data(), size_t(logits_held_ * V_));
    host_rows_ = logits_held_;
  }
  return host_logits_.data();
}

template <typename T>
void Decoder<T>::top_k(int64_t first, int64_t rows, int64_t k, const std::vector<uint8_t>& banned,
                       int32_t* ids, T* values, int32_t* first_nonfinite) {
  SPS_ASSERT(logit_positions_ == 1 && first >= 0 && rows >= 1 && first + rows <= logits_held_);
  SPS_ASSERT(int64_t(banned.size()) == V_ && k >= 1 && k <= ops::kMaxTopK);
  if (banned != banned_host_) {
    banned_.upload(banned.data(), banned.size());
    banned_host_ = banned;
  }
  const size_t chosen = size_t(rows * k), words_per_value = sizeof(T) / sizeof(int32_t);
  const size_t values_at =
      (chosen + size_t(rows) + words_per_value - 1) / words_per_value * words_per_value;
  const size_t words = values_at + chosen * words_per_value;
  top_answer_.reserve(words);
  int32_t* answer = top_answer_.data();
  backend_.top_k_rows(answer, reinterpret_cast<T*>(answer + values_at), answer + chosen,
                      logits_.data() + first * V_, rows, V_, banned_.data(), k);
  top_answer_host_.resize(words);
  top_answer_.download(top_answer_host_.data(), words);
  std::memcpy(ids, top_answer_host_.data(), chosen * sizeof(int32_t));
  std::memcpy(first_nonfinite, top_answer_host_.data() + chosen, size_t(rows) * sizeof(int32_t));
  std::memcpy(values, top_answer_host_.data() + values_at, chosen * sizeof(T));
}

template <typename T>
void Decoder<T>::fork(int64_t row, const Decoder& source, int64_t source_row) {
  SPS_ASSERT(source.V_ == V_ && source.Q_ == Q_ && source.d_ == d_);
  SPS_ASSERT(0 <= row && row < shape_.batch && 0 <= source_row && source_row < source.shape_.batch);
  SPS_ASSERT(source.next_position_[source_row] <= shape_.max_prompt_tokens);
  cache_.copy_sequence(row, source.cache_, source_row);
  next_position_[row] = source.next_position_[source_row];
  last_token_[row] = source.last_token_[source_row];
  backend_.copy(logits_.data() + row * V_, source.logits_.data() + source_row * V_,
                sizeof(T) * V_);
  logits_changed(std::max(logits_held_, row + 1));
}

template <typename T>
void Decoder<T>::move_row(int64_t row, int64_t from) {
  SPS_ASSERT(0 <= row && row < shape_.batch && 0 <= from && from < shape_.batch);
  if (row == from) return;
  cache_.copy_sequence(row, cache_, from);
  next_position_[row] = next_position_[from];
  last_token_[row] = last_token_[from];
  backend_.copy(logits_.data() + row * V_, logits_.data() + from * V_, sizeof(T) * V_);
  logits_changed(std::max(logits_held_, row + 1));
}

template <typename T>
void Decoder<T>::extend(const int32_t* tokens, int64_t K, int64_t rows) {
  const ModelConfig& c = model_.config();
  const ParamTable& table = model_.params();
  const int64_t B = rows < 0 ? shape_.batch : rows, slots = B * K * Q_;
  SPS_ASSERT(B >= 1 && B <= shape_.batch);
  SPS_ASSERT(K >= 1 && K <= shape_.max_chunk_tokens);
  const int64_t ring_capacity = cache_.shape().ring_capacity;
  int64_t positions_needed = 0;
  for (int64_t b = 0; b < B; ++b)
    positions_needed = std::max(positions_needed, next_position_[b] + K);
  if (positions_needed > model_.rope_positions())  // doubling: a few uploads in a long run
    model_.cover_rope_positions(std::min(
        max_positions_, std::max(positions_needed, 2 * model_.rope_positions())));
  for (int64_t b = 0; b < B; ++b) {
    if (last_token_[b] == c.eos_token_id) cache_.clear(b);  // a new document starts here
    for (int64_t t = 0; t < K; ++t) {
      const int32_t token = tokens[b * K + t];
      SPS_ASSERT(token >= 0 && token < V_ && (token != c.eos_token_id || t == K - 1));
      const int64_t pos = next_position_[b] + t;
      SPS_ASSERT(pos < max_positions_);  // so the row's document fits the cache too
      int32_t* slot_tokens = step_inputs_host_.data() + (b * K + t) * Q_;
      slot_tokens[0] = token;
      if (Q_ == 2) slot_tokens[1] = c.predict_token_id;
      for (int64_t a = 0; a < Q_; ++a) slot_tokens[slots + a] = int32_t(pos);
    }
    ring_next_[b] = ring_capacity > 0 ? cache_.ring_slot(b) : 0;
  }
  ops::DecodeAttentionLayout attn;
  attn.batch = B;
  attn.tokens = K;
  attn.queries = Q_;
  attn.heads = H_;
  attn.head_dim = D_;
  attn.persistent_stream = persistent_stream_;
  attn.window = c.window_size;
  attn.persistent_key_window = c.persistent_key_window;
  attn.persistent_capacity = cache_.shape().persistent_capacity;
  attn.ring_capacity = ring_capacity;
  // Counted from the host's lengths: a device backend is never asked for a count.
  attn.persistent_end = cache_.persistent_lengths();
  attn.ring_len = cache_.ring_lengths();
  attn.ring_next = ring_next_.data();
  last_step_pairs_ = L_ * ops::decode_attention_pairs(attn);
  // The counts, and the tokens and positions, cross in one copy each.
  std::copy_n(cache_.persistent_lengths(), B, step_counts_host_.begin());
  std::copy_n(cache_.ring_lengths(), B, step_counts_host_.begin() + B);
  std::copy_n(ring_next_.begin(), B, step_counts_host_.begin() + 2 * B);
  step_counts_.upload(step_counts_host_.data(), size_t(3 * B));
  attn.persistent_end = step_counts_.data();
  attn.ring_len = step_counts_.data() + B;
  attn.ring_next = step_counts_.data() + 2 * B;
  step_inputs_.upload(step_inputs_host_.data(), size_t(2 * slots));
  // The new rows join the cache after each layer's attention; the counts move after all
  // layers, so no layer of this call sees them as cached. Of the ring pushes only the last
  // ring_capacity survive.
  cache_.clear_writes();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < K; ++t) {
      const int64_t slot = (b * K + t) * Q_;
      cache_.plan_persistent_write(b, cache_.persistent_length(b) + t, slot + persistent_stream_);
      if (ring_capacity > 0 && t >= K - ring_capacity)
        cache_.plan_ring_write(b, (ring_next_[b] + t) % ring_capacity, slot + window_stream_);
    }

  const int32_t* pos = step_inputs_.data() + slots;
  // The model's block, in place on h, with the decode attention over the cache.
  BlockBuffers<T*> block{};
  block.h_in = block.h_mid = h_.data();
  block.n1 = block.n2 = n_.data();
  block.rstd1 = block.rstd2 = rstd_.data();
  block.qkv = qkv_.data();
  block.att = att_.data();
  block.gate_up = gate_up_.data();
  block.act = act_.data();
  T* h = h_.data();
  model_.embed(h, step_inputs_.data(), slots);
  for (int64_t l = 0; l < L_; ++l) {
    model_.block_attention_input(l, block, pos, slots, true);
    if (cache_.shape().type == KvType::bf16) {
      const auto kv = std::as_const(cache_).bf16_layer(l);
      backend_.attention_decode_bf16_cache(block.att, block.qkv, kv.persistent_k, kv.persistent_v,
                                           kv.ring_k, kv.ring_v, attn);
    } else {
      const auto kv = std::as_const(cache_).layer(l);
      backend_.attention_decode(block.att, block.qkv, kv.persistent_k, kv.persistent_v, kv.ring_k,
                                kv.ring_v, attn);
    }
    cache_.write_layer(l, block.qkv);
    // In the last layer only the readout stream's rows still matter (the other stream's keys
    // and values are in the cache now): gather them into readout_ and skip the rest's
    // projection and MLP, which feed nothing. Each row's arithmetic is unchanged.
    int64_t rows = slots;
    if (l == L_ - 1 && Q_ == 2) {
      rows = B * K;
      const int64_t most = shape_.batch * shape_.max_chunk_tokens;  // rows the offsets cover
      const int64_t* to = readout_offsets_.data();
      const int64_t* from = to + most;
      T* readout_h = readout_.data();
      T* readout_att = readout_h + most * d_;
      backend_.copy_rows(readout_h, block.h_in, to, from, rows, d_);
      backend_.copy_rows(readout_att, block.att, to, from, rows, d_);
      block.h_in = block.h_mid = h = readout_h;
      block.att = readout_att;
    }
    model_.block_output(l, block, block.att, rows, h, true);
  }
  // The readout rows are the first B·K rows of h (gathered above when Q = 2).
  backend_.rmsnorm_forward(nf_.data(), rstdf_.data(), h,
                           std::as_const(model_).weights() + table.output_norm(), B * K, d_,
                           c.norm_eps);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < K; ++t) cache_.advance(b);
    next_position_[b] += K;
    last_token_[b] = tokens[b * K + K - 1];
  }
  model_.block_linear(logits_.data(), nf_.data(), table.wte(), B * K, d_, V_, false, true);
  logit_positions_ = K;
  logits_changed(B * K);
}

template class Decoder<float>;
template class Decoder<double>;

}  // namespace sps
