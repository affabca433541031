#include "model/model.h"

#include <algorithm>
#include <type_traits>

#include "ops/backend_registry.h"
#include "util/error.h"
#include "util/process_stats.h"

namespace sps {

namespace {

// The config, once it is valid and its weights fit in the backend's memory (checked before
// the parameter table or any buffer is built).
template <typename T>
const ModelConfig& fitting(const ModelConfig& c, const ops::Memory& memory) {
  c.validate("model config");
  memory.require(__int128(c.parameter_count()) * sizeof(T),
                 fmt::format("model config: the weights of {} parameters", c.parameter_count()));
  return c;
}

}  // namespace

template <typename T>
Model<T>::Model(const ModelConfig& config, const ops::Backend<T>& backend, InitialWeights initial)
    : config_(fitting<T>(config, backend)),
      family_(family_by_name(config.family)),
      table_(config),
      backend_(backend) {
  weights_.reset(size_t(table_.total()));
  if (initial == InitialWeights::zero) backend_.fill(weights_.data(), table_.total(), T(0));
  gemm_weights_ = backend_.gemm_weight_copies(weights_.data(), table_.total());
}

template <typename T>
void Model<T>::init_weights(uint64_t seed) {
  SPS_ASSERT(!packed_);
  ops::on_host(backend_, weights(), size_t(table_.total()), ops::HostAccess::write,
               [&](T* weights) { init_parameters(weights, table_, config_, seed); });
}

template <typename T>
std::vector<typename Model<T>::PackedProjection> Model<T>::projections() const {
  const int64_t d = config_.hidden_size, F = config_.intermediate_size;
  std::vector<PackedProjection> list;
  for (int64_t l = 0; l < config_.n_layer; ++l) {
    const LayerParams& p = table_.layer(l);
    list.push_back({p.c_attn, d, 3 * d, 0});
    list.push_back({p.c_proj, d, d, 0});
    list.push_back({p.gate_up, d, 2 * F, 0});
    list.push_back({p.down_proj, F, d, 0});
  }
  // The tied table too: the LM head reads it as a projection, the embedding gathers from it.
  list.push_back({table_.wte(), d, config_.vocab_size, 0});
  return list;
}

template <typename T>
void Model<T>::pack_projections(ops::WeightType type, const WeightReader& read) {
  std::vector<PackedProjection> list = projections();
  int64_t bytes = 0;
  for (PackedProjection& p : list) {
    p.packed_at = bytes;
    const int64_t size = backend_.packed_weight_bytes(type, p.in_dim, p.out_dim);
    bytes += (size + 63) / 64 * 64;
  }
  backend_.require(bytes, fmt::format("the {} weights packed for inference",
                                      ops::weight_type_name(type)));
  packed_weights_.reset(size_t(bytes));
  // A few panels at a time: their fp32 rows are all the memory the packing takes.
  const int64_t panel = backend_.packed_panel_rows();
  std::vector<T> rows;
  for (const PackedProjection& p : list) {
    const int64_t step = std::max<int64_t>(1, (int64_t(1) << 18) / (panel * p.in_dim)) * panel;
    rows.resize(size_t(std::min(step, p.out_dim) * p.in_dim));
    const auto entry = std::find_if(table_.entries().begin(), table_.entries().end(),
                                    [&](const ParamEntry& e) { return e.offset == p.offset; });
    const std::string what = entry->name;
    for (int64_t first = 0; first < p.out_dim; first += step) {
      const int64_t count = std::min(step, p.out_dim - first);
      read(p.offset + first * p.in_dim, count * p.in_dim, rows.data());
      backend_.pack_weight_rows(type, packed_weights_.data() + p.packed_at, rows.data(), first,
                                count, p.in_dim, p.out_dim, what);
    }
  }
  packed_projections_ = std::move(list);
  weight_type_ = type;
  packed_ = true;
}

template <typename T>
void Model<T>::set_kv_type(KvType type) {
  require_kv_type(type, backend_.device());
  kv_type_ = type;
}

template <typename T>
void Model<T>::pack_for_inference(ops::WeightType type) {
  if (packed_) {
    SPS_ASSERT(type == weight_type_);
    return;
  }
  if (backend_.packed_panel_rows() == 0) {  // the rows stay, as the backend reads them
    if (type != ops::WeightType::f32)
      fail("--weight-type {}: the {} backend keeps f32 weights", ops::weight_type_name(type),
           backend_.device().name());
    return;
  }
  SPS_ASSERT(backend_.host_accessible());
  T* flat = weights_.data();
  pack_projections(type, [&](int64_t offset, int64_t count, T* out) {
    std::copy(flat + offset, flat + offset + count, out);
  });
  for (const PackedProjection& p : packed_projections_)
    release_memory_pages(flat + p.offset, size_t(p.in_dim * p.out_dim) * sizeof(T));
}

template <typename T>
void Model<T>::load_for_inference(ops::WeightType type, const WeightReader& read) {
  SPS_ASSERT(!packed_ && grads_.size() == 0);
  const bool packs = backend_.packed_panel_rows() > 0;
  if (!packs && type != ops::WeightType::f32)
    fail("--weight-type {}: the {} backend keeps f32 weights", ops::weight_type_name(type),
         backend_.device().name());
  // Everything but the packed projections goes to the flat buffer, tensor by tensor.
  std::vector<PackedProjection> packed_list = packs ? projections() : std::vector<PackedProjection>{};
  auto packed_covers = [&](int64_t offset) {
    for (const PackedProjection& p : packed_list)
      if (offset >= p.offset && offset < p.offset + p.in_dim * p.out_dim) return true;
    return false;
  };
  for (const ParamEntry& e : table_.entries()) {
    if (packed_covers(e.offset)) continue;
    ops::on_host(backend_, weights_.data() + e.offset, size_t(e.numel), ops::HostAccess::write,
                 [&](T* values) { read(e.offset, e.numel, values); });
  }
  if (packs) pack_projections(type, read);
}

template <typename T>
int64_t Model<T>::weight_bytes() const {
  int64_t flat = table_.total();  // the tensors the flat buffer still holds
  for (const PackedProjection& p : packed_projections_) flat -= p.in_dim * p.out_dim;
  return int64_t(packed_weights_.size()) + flat * int64_t(sizeof(T));
}

template <typename T>
const typename Model<T>::PackedProjection& Model<T>::packed_projection(int64_t offset) const {
  for (const PackedProjection& p : packed_projections_)
    if (p.offset == offset) return p;
  SPS_ASSERT(!"not a packed projection");
  return packed_projections_.front();
}

template <typename T>
void Model<T>::block_linear(T* out, const T* in, int64_t offset, int64_t rows, int64_t in_dim,
                            int64_t out_dim, bool accumulate, bool few_rows) const {
  if (packed_) {
    const PackedProjection& p = packed_projection(offset);
    SPS_ASSERT(p.in_dim == in_dim && p.out_dim == out_dim);
    backend_.linear_packed_forward(out, in, packed_weights_.data() + p.packed_at, weight_type_,
                                   rows, in_dim, out_dim, accumulate);
    return;
  }
  const T* weight = weights_.data() + offset;
  if (few_rows)
    backend_.linear_decode_forward(out, in, weight, rows, in_dim, out_dim, accumulate);
  else
    backend_.linear_forward(out, in, weight, rows, in_dim, out_dim, accumulate);
}

template <typename T>
void Model<T>::embed(T* out, const int32_t* tokens, int64_t n) const {
  if (packed_)
    backend_.embedding_packed_forward(out, tokens,
                                      packed_weights_.data() +
                                          packed_projection(table_.wte()).packed_at,
                                      weight_type_, n, config_.hidden_size, config_.vocab_size);
  else
    backend_.embedding_forward(out, tokens, weights_.data() + table_.wte(), n,
                               config_.hidden_size);
}

template <typename T>
T* Model<T>::grads() {
  SPS_ASSERT(!packed_);  // weights packed for inference cannot be trained
  if (grads_.size() == 0) {
    backend_.require(__int128(table_.total()) * sizeof(T),
                     fmt::format("model config: the gradients of {} parameters", table_.total()));
    grads_.reset(size_t(table_.total()));
    backend_.fill(grads_.data(), table_.total(), T(0));
  }
  return grads_.data();
}

template <typename T>
void Model<T>::zero_grads() {
  backend_.fill(grads(), table_.total(), T(0));
}

namespace {

using BlockOffsets = BlockBuffers<int64_t>;

// Element offsets of every activation buffer in the one allocation for (B, T). Blocks are
// laid out alike, so the plan holds block 0 and the strides to the others (O(1) in n_layer,
// so even an absurd config is planned, and refused, without allocating).
struct ActivationPlan {
  BlockOffsets first{};        // block 0
  int64_t block_stride = 0;    // between blocks' buffers (0: all share block 0's)
  int64_t h_in_stride = 0;     // between blocks' inputs
  int64_t h_out, nf, rstdf, logits, lse_head, nll, dh, dn, dqkv, datt, dgate_up, dact, dnf;
  int64_t total = 0;

  BlockOffsets block(int64_t l) const {
    BlockOffsets o = first;
    o.h_in += l * h_in_stride;
#define SPS_SHIFT(name, width) o.name += l * block_stride;
    SPS_BLOCK_ACTIVATIONS(SPS_SHIFT)
#undef SPS_SHIFT
    return o;
  }
};

[[noreturn]] void activations_too_large(const ModelConfig& c, int64_t B, int64_t T_) {
  fail("model config: the activations for a batch of {} × {} tokens (L={}, d={}, F={}, V={}) "
       "do not fit 64-bit sizes",
       B, T_, c.n_layer, c.hidden_size, c.intermediate_size, c.vocab_size);
}

// a · b, refused when it does not fit 64 bits.
int64_t checked_product(int64_t a, int64_t b, const ModelConfig& c, int64_t B, int64_t T_) {
  int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) activations_too_large(c, B, T_);
  return out;
}

ActivationPlan plan_activations(const ModelConfig& c, int64_t B, int64_t T_,
                                ActivationPlanKind kind, int64_t lm_head_rows) {
  auto product = [&](int64_t a, int64_t b) { return checked_product(a, b, c, B, T_); };
  const int64_t rows = product(product(B, family_by_name(c.family).streams()), T_);
  const int64_t readout_rows = product(B, T_);
  const int64_t d = c.hidden_size, F = c.intermediate_size, H = c.n_head, V = c.vocab_size;
  ActivationPlan p;
  auto take = [&](int64_t n) {
    const int64_t offset = p.total;
    // 64-byte aligned slices for float
    if (n > INT64_MAX - 15 || __builtin_add_overflow(p.total, (n + 15) / 16 * 16, &p.total))
      activations_too_large(c, B, T_);
    return offset;
  };
  auto take_block = [&](int64_t h_in) {
    BlockOffsets o;
    o.h_in = h_in;
#define SPS_TAKE(name, width) o.name = take(product(rows, width));
    SPS_BLOCK_ACTIVATIONS(SPS_TAKE)
#undef SPS_TAKE
    return o;
  };
  const int64_t layers_after_first = c.n_layer - 1;
  if (kind == ActivationPlanKind::inference) {
    // One residual buffer and one block's activations, shared by all blocks: a block reads
    // its input only until h_mid exists, so its output may overwrite it.
    p.first = take_block(take(product(rows, d)));
    p.h_out = p.first.h_in;
    p.nf = take(product(readout_rows, d));
    p.rstdf = take(readout_rows);
    p.logits = take(product(std::min(lm_head_rows, readout_rows), V));
    p.lse_head = take(readout_rows);
    p.nll = take(readout_rows);
    p.dh = p.dn = p.dqkv = p.datt = p.dgate_up = p.dact = p.dnf = -1;  // no backward
    return p;
  }
  if (kind == ActivationPlanKind::training_recomputed) {
    // every block keeps its input; the rest is one block's worth, shared
    const int64_t h_in = take(product(rows, d));
    p.h_in_stride = p.total - h_in;
    take(product(p.h_in_stride, layers_after_first));
    p.first = take_block(h_in);
  } else {
    const int64_t start = p.total;
    p.first = take_block(take(product(rows, d)));
    p.block_stride = p.h_in_stride = p.total - start;
    take(product(p.block_stride, layers_after_first));
  }
  p.h_out = take(product(rows, d));
  p.nf = take(product(readout_rows, d));
  p.rstdf = take(readout_rows);
  p.logits = take(product(std::min(lm_head_rows, readout_rows), V));
  p.lse_head = take(readout_rows);
  p.nll = take(readout_rows);
  p.dh = take(product(rows, d));
  p.dn = take(product(rows, d));
  p.dqkv = take(product(rows, 3 * d));
  p.datt = take(product(rows, d));
  p.dgate_up = take(product(rows, 2 * F));
  p.dact = take(product(rows, F));
  p.dnf = take(product(readout_rows, d));
  return p;
}

}  // namespace

int64_t lm_head_chunk_rows(const ops::Device& device) {
  return ops::capabilities(device).lm_head_rows;
}

int64_t planned_activation_bytes(const ModelConfig& c, int64_t batch, int64_t tokens,
                                 ActivationPlanKind kind, const ops::Device& device) {
  return checked_product(plan_activations(c, batch, tokens, kind, lm_head_chunk_rows(device)).total,
                         int64_t(sizeof(float)), c, batch, tokens);
}

template <typename T>
__int128 Model<T>::inference_activation_bytes(int64_t batch, int64_t tokens) const {
  return __int128(plan_activations(config_, batch, tokens, ActivationPlanKind::inference,
                                   lm_head_chunk_rows(backend_.device()))
                      .total) *
         sizeof(T);
}

template <typename T>
void Model<T>::reserve(int64_t B, int64_t T_, bool training) {
  // A training plan serves forwards too; an inference plan serves only forwards.
  const bool kind_fits = !training || planned_kind_ != ActivationPlanKind::inference;
  if (kind_fits && B <= planned_batch_ && T_ <= planned_tokens_) return;
  const ActivationPlanKind kind =
      training || planned_kind_ != ActivationPlanKind::inference ? training_plan()
                                                                 : ActivationPlanKind::inference;
  B = std::max(B, planned_batch_);
  T_ = std::max(T_, planned_tokens_);
  const ActivationPlan plan =
      plan_activations(config_, B, T_, kind, lm_head_chunk_rows(backend_.device()));
  backend_.require(__int128(plan.total) * sizeof(T),
                   fmt::format("model config: the activations for a batch of {} × {} tokens", B, T_));
  acts_.reset(size_t(plan.total));
  T* base = acts_.data();
  const auto at = [base](int64_t offset) { return offset < 0 ? nullptr : base + offset; };
  layer_acts_.resize(config_.n_layer);
  for (int64_t l = 0; l < config_.n_layer; ++l) {
    const BlockOffsets o = plan.block(l);
    LayerActs& a = layer_acts_[l];
    a.h_in = base + o.h_in;
#define SPS_POINT(name, width) a.name = base + o.name;
    SPS_BLOCK_ACTIVATIONS(SPS_POINT)
#undef SPS_POINT
  }
  h_out_ = at(plan.h_out);
  nf_ = at(plan.nf);
  rstdf_ = at(plan.rstdf);
  logits_ = at(plan.logits);
  lse_head_ = at(plan.lse_head);
  nll_ = at(plan.nll);
  dh_ = at(plan.dh);
  dn_ = at(plan.dn);
  dqkv_ = at(plan.dqkv);
  datt_ = at(plan.datt);
  dgate_up_ = at(plan.dgate_up);
  dact_ = at(plan.dact);
  dnf_ = at(plan.dnf);
  planned_batch_ = B;
  planned_tokens_ = T_;
  planned_kind_ = kind;
  cover_rope_positions(T_);
  const size_t slots = size_t(B * family_.streams() * T_);
  host_positions_.reserve(slots);
  for (auto* buffer : {&slot_tokens_, &slot_positions_}) buffer->reserve(slots);
  for (auto* buffer : {&doc_, &doc_start_, &readout_targets_}) buffer->reserve(size_t(B * T_));
}

template <typename T>
void Model<T>::cover_rope_positions(int64_t n) {
  if (n <= rope_positions_) return;
  const int64_t D = config_.head_dim();
  std::vector<T> cos_table(n * D / 2, T(0)), sin_table(n * D / 2, T(0));
  ops::rope_tables(cos_table.data(), sin_table.data(), n, D, config_.rope_theta);
  rope_cos_.upload(cos_table.data(), cos_table.size());
  rope_sin_.upload(sin_table.data(), sin_table.size());
  rope_positions_ = n;
}

template <typename T>
void Model<T>::set_recompute(bool on) {
  if (on == recompute_) return;
  recompute_ = on;
  release_activations();  // the next forward plans for the new layout
}

template <typename T>
void Model<T>::release_activations() {
  acts_.reset(0);
  layer_acts_.clear();
  h_out_ = nf_ = rstdf_ = logits_ = lse_head_ = nll_ = nullptr;
  dh_ = dn_ = dqkv_ = datt_ = dgate_up_ = dact_ = dnf_ = nullptr;
  planned_batch_ = planned_tokens_ = 0;
  planned_kind_ = ActivationPlanKind::inference;
}

template <typename T>
ops::AttentionLayout Model<T>::attention_layout() const {
  ops::AttentionLayout attn;
  attn.batch = batch_;
  attn.tokens = tokens_;
  attn.streams = family_.streams();
  attn.persistent_stream = family_.persistent_stream();
  attn.window = config_.window_size;
  attn.persistent_key_window = config_.persistent_key_window;
  attn.heads = config_.n_head;
  attn.head_dim = config_.head_dim();
  attn.doc = doc_.data();
  attn.doc_start = doc_start_.data();
  if (const int64_t tile = backend_.attention_tile()) {
    attn.tile_kinds = tile_kinds_.data();
    attn.tile = tile;
    attn.tile_pairs = tile_plan_.computed_pairs;
  }
  return attn;
}

template <typename T>
void Model<T>::upload_layout(const int32_t* y) {
  const int64_t B = batch_, T_ = tokens_, S = layout_.slots(), rows = B * S;
  host_positions_.resize(rows);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s) host_positions_[b * S + s] = layout_.positions[b * T_ + s % T_];
  slot_positions_.upload(host_positions_.data(), rows);
  slot_tokens_.upload(layout_.slot_tokens.data(), rows);
  doc_.upload(layout_.doc.data(), B * T_);
  doc_start_.upload(layout_.doc_start.data(), B * T_);
  if (const int64_t tile = backend_.attention_tile()) {
    ops::AttentionLayout host = attention_layout();
    host.doc = layout_.doc.data();
    host.doc_start = layout_.doc_start.data();
    ops::plan_attention_tiles(tile_plan_, host, tile, tile);
    tile_kinds_.upload(tile_plan_.kinds.data(), tile_plan_.kinds.size());
  }
  if (y) readout_targets_.upload(y, B * T_);
}

template <typename T>
StepResult Model<T>::forward(const int32_t* x, const int32_t* y, int64_t B, int64_t T_,
                             const ForwardOptions& options) {
  return run(x, y, B, T_, false, 1.0, options, {});
}

template <typename T>
StepResult Model<T>::forward_backward(const int32_t* x, const int32_t* y, int64_t B,
                                      int64_t T_, double grad_scale,
                                      const BackwardOptions<T>& backward) {
  return run(x, y, B, T_, true, grad_scale, {}, backward);
}

template <typename T>
StepResult Model<T>::run(const int32_t* x, const int32_t* y, int64_t B, int64_t T_,
                         bool backward, double grad_scale, const ForwardOptions& options,
                         const BackwardOptions<T>& backward_options) {
  SPS_ASSERT(T_ <= config_.block_size && B > 0 && T_ > 0);
  reserve(B, T_, backward);  // no-op unless the shape or the kind outgrows the plan
  batch_ = B;
  tokens_ = T_;
  build_slot_layout(layout_, x, B, T_, config_, family_);
  upload_layout(options.blocks_only ? nullptr : y);

  const int64_t rows = B * layout_.slots();
  StepResult result;
  result.kept = layout_.kept;
  embed(layer_acts_[0].h_in, slot_tokens_.data(), rows);
  for (int64_t l = 0; l < config_.n_layer; ++l) {
    result.attention_pairs +=
        l + 1 < config_.n_layer ? layer_forward(l, layer_acts_[l + 1].h_in)
                                : layer_forward(l, h_out_, options.blocks_only);
    if (options.after_layer) options.after_layer(l);
  }

  if (options.blocks_only) {
    SPS_ASSERT(!backward && !options.nll && !options.logits);
    return result;
  }
  lm_head(y, backward, grad_scale, result, options, backward_options);
  if (backward) backward_layers(backward_options);
  return result;
}

template <typename T>
int64_t Model<T>::layer_forward(int64_t l, T* h_next, bool last_readouts_only) {
  const int64_t rows = batch_ * layout_.slots();
  LayerActs& a = layer_acts_[l];
  block_attention_input(l, a, slot_positions_.data(), rows, false);
  const int64_t pairs = backend_.attention_forward(a.att, a.lse, a.qkv, attention_layout());
  if (last_readouts_only)
    last_readouts_forward(l, h_next);
  else
    block_output(l, a, a.att, rows, h_next, false);
  return pairs;
}

template <typename T>
void Model<T>::block_attention_input(int64_t l, const BlockBuffers<T*>& a, const int32_t* positions,
                                     int64_t rows, bool few_rows) const {
  const int64_t d = config_.hidden_size, H = config_.n_head, D = config_.head_dim();
  const LayerParams& p = table_.layer(l);
  backend_.rmsnorm_forward(a.n1, a.rstd1, a.h_in, weights_.data() + p.attention_norm, rows, d,
                           config_.norm_eps);
  block_linear(a.qkv, a.n1, p.c_attn, rows, d, 3 * d, false, few_rows);
  for (T* rotated : {a.qkv, a.qkv + d})  // q, then k
    backend_.rope_forward(rotated, positions, rows, H, D, 3 * d, rope_cos_.data(),
                          rope_sin_.data());
}

template <typename T>
void Model<T>::block_output(int64_t l, const BlockBuffers<T*>& a, const T* att, int64_t rows,
                            T* h_next, bool few_rows) const {
  const int64_t d = config_.hidden_size, F = config_.intermediate_size;
  const LayerParams& p = table_.layer(l);
  if (a.h_mid != a.h_in) backend_.copy(a.h_mid, a.h_in, sizeof(T) * rows * d);
  block_linear(a.h_mid, att, p.c_proj, rows, d, d, true, few_rows);
  backend_.rmsnorm_forward(a.n2, a.rstd2, a.h_mid, weights_.data() + p.mlp_norm, rows, d,
                           config_.norm_eps);
  block_linear(a.gate_up, a.n2, p.gate_up, rows, d, 2 * F, false, few_rows);
  backend_.swiglu_forward(a.act, a.gate_up, rows, F);
  if (!h_next) return;
  if (h_next != a.h_mid) backend_.copy(h_next, a.h_mid, sizeof(T) * rows * d);
  block_linear(h_next, a.act, p.down_proj, rows, F, d, true, few_rows);
}

// The rest of block l (after its attention) for the last readout slot of each sequence: their
// attention outputs and inputs gathered into the first rows of n1 (free after the q|k|v
// projection) and h_mid, the output projection and MLP on those rows, the outputs put in
// place in h_next. The same ops on the same rows: with packed weights, whose kernel computes
// each row alone, the same bits as the whole block.
template <typename T>
void Model<T>::last_readouts_forward(int64_t l, T* h_next) {
  const int64_t B = batch_, S = layout_.slots(), d = config_.hidden_size;
  LayerActs& a = layer_acts_[l];
  std::vector<int64_t> offsets(size_t(2 * B));  // row b, and the last readout slot of b
  for (int64_t b = 0; b < B; ++b) {
    offsets[b] = b * d;
    offsets[B + b] = (b * S + family_.readout_stream() * tokens_ + tokens_ - 1) * d;
  }
  last_readout_offsets_.upload(offsets.data(), offsets.size());
  const int64_t* row = last_readout_offsets_.data();
  const int64_t* slot = row + B;
  backend_.copy_rows(a.n1, a.att, row, slot, B, d);
  backend_.copy_rows(a.h_mid, a.h_in, row, slot, B, d);
  LayerActs gathered = a;  // the block's rest in place on the gathered rows
  gathered.h_in = a.h_mid;
  block_output(l, gathered, a.n1, B, a.n1, B <= 16);
  backend_.copy_rows(h_next, a.n1, slot, row, B, d);
}

// Output norm and tied LM head on the readout slots only, in chunks of rows so the logits
// buffer stays [chunk, V]. With backward, each chunk's logits are turned into their
// gradient at once, so logits are never recomputed.
template <typename T>
void Model<T>::lm_head(const int32_t* y, bool backward, double grad_scale, StepResult& result,
                       const ForwardOptions& options, const BackwardOptions<T>& backward_options) {
  const int64_t B = batch_, T_ = tokens_, S = layout_.slots();
  const int64_t d = config_.hidden_size, V = config_.vocab_size;
  const int64_t readout_stream = family_.readout_stream();
  const T* W = weights_.data();
  const T* E = W + table_.wte();
  for (int64_t b = 0; b < B; ++b) {
    const T* rows_in = h_out_ + (b * S + readout_stream * T_) * d;
    backend_.rmsnorm_forward(nf_ + b * T_ * d, rstdf_ + b * T_, rows_in, W + table_.output_norm(),
                         T_, d, config_.norm_eps);
  }
  // Each row's loss weight goes up once and the losses come down once, after the last chunk,
  // so a device backend runs the chunks without waiting on the host.
  const int64_t readout_rows = B * T_;
  T* dnll = dgate_up_;  // free until the layers' backward starts
  if (backward) {
    const T row_grad = layout_.kept > 0 ? T(grad_scale / double(layout_.kept)) : T(0);
    const double* weight = backward_options.loss_weight;
    host_rows_.resize(readout_rows);
    for (int64_t k = 0; k < readout_rows; ++k)
      host_rows_[k] = weight ? T(grad_scale * weight[k]) : layout_.keep[k] ? row_grad : T(0);
    backend_.upload(dnll, host_rows_.data(), sizeof(T) * readout_rows);
  }
  const int64_t chunk = lm_head_chunk_rows(backend_.device());
  for (int64_t r0 = 0; r0 < readout_rows; r0 += chunk) {
    const int64_t n = std::min(chunk, readout_rows - r0);
    const int32_t* targets = readout_targets_.data() + r0;
    T* logits = logits_;
    if constexpr (std::is_same_v<T, float>)
      if (options.float_logits && !backward && backend_.host_accessible())
        logits = options.float_logits + r0 * V;
    block_linear(logits, nf_ + r0 * d, table_.wte(), n, d, V, false, false);
    backend_.cross_entropy_forward(nll_ + r0, lse_head_ + r0, logits, targets, n, V);
    if (options.float_logits && logits == logits_) {
      host_rows_.resize(n * V);
      backend_.download(host_rows_.data(), logits_, sizeof(T) * n * V);
      std::copy(host_rows_.begin(), host_rows_.begin() + n * V, options.float_logits + r0 * V);
    }
    if (options.logits) {
      host_rows_.resize(n * V);
      backend_.download(host_rows_.data(), logits, sizeof(T) * n * V);
      for (int64_t k = 0; k < n * V; ++k) options.logits[r0 * V + k] = double(host_rows_[k]);
    }
    if (!backward) continue;
    backend_.cross_entropy_backward(logits_, logits_, lse_head_ + r0, targets, dnll + r0, n, V);
    if (backward_options.observer)
      backward_options.observer->linear(table_.wte(), nf_ + r0 * d, logits_, r0, n, d, V, true);
    backend_.linear_backward(dnf_ + r0 * d, grads() + table_.wte(), logits_, nf_ + r0 * d, E,
                         n, d, V, false);
  }
  host_rows_.resize(readout_rows);
  backend_.download(host_rows_.data(), nll_, sizeof(T) * readout_rows);
  for (int64_t k = 0; k < readout_rows; ++k) {
    if (options.nll) options.nll[k] = double(host_rows_[k]);
    if (layout_.keep[k]) result.nll_sum += double(host_rows_[k]);
  }
  result.loss = layout_.kept > 0 ? result.nll_sum / double(layout_.kept) : 0.0;
}

template <typename T>
void Model<T>::backward_layers(const BackwardOptions<T>& options) {
  GradientObserver<T>* observer = options.observer;
  const int64_t B = batch_, T_ = tokens_, S = layout_.slots(), rows = B * S;
  const int64_t d = config_.hidden_size, F = config_.intermediate_size;
  const int64_t H = config_.n_head, D = config_.head_dim();
  const int64_t readout_stream = family_.readout_stream();
  const T* W = weights_.data();
  T* G = grads();
  const int32_t* pos = slot_positions_.data();

  const ops::AttentionLayout attn = attention_layout();

  // dh: gradient of the residual stream, [B·S, d]; only readout rows get the head's.
  backend_.fill(dh_, rows * d, T(0));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t row0 = b * S + readout_stream * T_;
    if (observer)
      observer->norm(table_.output_norm(), h_out_ + row0 * d, rstdf_ + b * T_, dnf_ + b * T_ * d,
                     b * T_, T_, d, true);
    backend_.rmsnorm_backward(dh_ + row0 * d, G + table_.output_norm(), dnf_ + b * T_ * d,
                          h_out_ + row0 * d, W + table_.output_norm(), rstdf_ + b * T_, T_, d);
  }
  for (int64_t l = config_.n_layer - 1; l >= 0; --l) {
    const LayerParams& p = table_.layer(l);
    const LayerActs& a = layer_acts_[l];
    // The last block's activations are still in place after the forward.
    if (recompute_ && l + 1 < config_.n_layer) layer_forward(l, nullptr);
    // MLP half.
    if (observer) observer->linear(p.down_proj, a.act, dh_, 0, rows, F, d, false);
    backend_.linear_backward(dact_, G + p.down_proj, dh_, a.act, W + p.down_proj, rows, F, d, false);
    backend_.swiglu_backward(dgate_up_, dact_, a.gate_up, rows, F);
    if (observer) observer->linear(p.gate_up, a.n2, dgate_up_, 0, rows, d, 2 * F, false);
    backend_.linear_backward(dn_, G + p.gate_up, dgate_up_, a.n2, W + p.gate_up, rows, d, 2 * F,
                         false);
    if (observer) observer->norm(p.mlp_norm, a.h_mid, a.rstd2, dn_, 0, rows, d, false);
    backend_.rmsnorm_backward(dh_, G + p.mlp_norm, dn_, a.h_mid, W + p.mlp_norm, a.rstd2, rows, d);
    // Attention half.
    if (observer) observer->linear(p.c_proj, a.att, dh_, 0, rows, d, d, false);
    backend_.linear_backward(datt_, G + p.c_proj, dh_, a.att, W + p.c_proj, rows, d, d, false);
    backend_.attention_backward(dqkv_, datt_, a.qkv, a.att, a.lse, attn);
    backend_.rope_backward(dqkv_, pos, rows, H, D, 3 * d, rope_cos_.data(), rope_sin_.data());
    backend_.rope_backward(dqkv_ + d, pos, rows, H, D, 3 * d, rope_cos_.data(), rope_sin_.data());
    if (observer) observer->linear(p.c_attn, a.n1, dqkv_, 0, rows, d, 3 * d, false);
    backend_.linear_backward(dn_, G + p.c_attn, dqkv_, a.n1, W + p.c_attn, rows, d, 3 * d, false);
    if (observer) observer->norm(p.attention_norm, a.h_in, a.rstd1, dn_, 0, rows, d, false);
    backend_.rmsnorm_backward(dh_, G + p.attention_norm, dn_, a.h_in, W + p.attention_norm, a.rstd1,
                          rows, d);
    if (options.gradients_done_from) options.gradients_done_from(p.attention_norm);
  }
  if (observer) observer->embedding(table_.wte(), slot_tokens_.data(), dh_, rows, d);
  // A backend that sums the table's gradient by token gets the rows grouped on the host.
  ops::TokenRows by_token;
  if (const int64_t run = backend_.embedding_run_rows()) {
    ops::plan_token_rows(token_rows_plan_, layout_.slot_tokens.data(), rows, config_.vocab_size,
                         run);
    const std::vector<int32_t> packed = token_rows_plan_.packed();
    token_rows_.upload(packed.data(), packed.size());
    by_token = token_rows_plan_.view(token_rows_.data());
  }
  backend_.embedding_backward(G + table_.wte(), dh_, slot_tokens_.data(), rows, d,
                              backend_.embedding_run_rows() ? &by_token : nullptr);
  if (options.gradients_done_from) options.gradients_done_from(0);
}

template class Model<float>;
template class Model<double>;

}  // namespace sps
