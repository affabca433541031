#pragma once
// The training forward and backward of every family (docs/model.md §2–§5), written against the
// backend boundary (ops/backend.h): weights, gradients and activations live in the backend's
// memory, and every loop over them is one of its ops. Activations live in one buffer planned
// for (batch, tokens) before the first step; a step does not allocate.
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "model/config.h"
#include "model/family.h"
#include "model/kv_cache.h"
#include "model/params.h"
#include "model/slot_layout.h"
#include "ops/attention_plan.h"
#include "ops/backend.h"
#include "ops/token_rows.h"

namespace sps {

struct ForwardOptions {
  double* nll = nullptr;     // optional [B, T] per-position NLL (every position)
  double* logits = nullptr;  // optional [B, T, V] logits read at the readout slots
  // The same logits as the LM head computes them (float), into host memory: written there in
  // place when the backend's memory is the host's and there is no backward (no copy; the
  // loss reads them from there), else copied chunk by chunk.
  float* float_logits = nullptr;
  // Stop before the output norm and LM head (no loss), for prefill: the last block runs its
  // output projection and MLP on each sequence's last readout slot only, the one row per
  // sequence of final_hidden() that prefill reads (the others hold no block's output).
  bool blocks_only = false;
  // Called after block l's forward, while layer_qkv(l) holds its q | k | v (prefill copies
  // the keys and values into its cache here).
  std::function<void(int64_t layer)> after_layer = nullptr;
};

// Which activation plan a forward runs in. Inference keeps one block's activations and one
// residual buffer, shared by all blocks; training keeps every block's (or, recomputed, every
// block's input) and the backward's buffers.
enum class ActivationPlanKind { inference, training, training_recomputed };

// One block's activations after its input, each [B·S, width] stream-major, in the order the
// activation plan lays them out; widths in d (hidden size), H (heads) and F (intermediate
// size). The one list of their names: the buffers, the plan and its pointers expand it.
// clang-format off
#define SPS_BLOCK_ACTIVATIONS(X)                                                         \
  X(n1, d) X(rstd1, 1) X(qkv, 3 * d) X(att, d) X(lse, H) X(h_mid, d) X(n2, d) X(rstd2, 1) \
  X(gate_up, 2 * F) X(act, F)
// clang-format on

// One block's buffers: its input h_in, then its activations; P is a pointer or an offset.
template <typename P>
struct BlockBuffers {
  P h_in;
#define SPS_BLOCK_FIELD(name, width) P name;
  SPS_BLOCK_ACTIVATIONS(SPS_BLOCK_FIELD)
#undef SPS_BLOCK_FIELD
};

// A per-slot view of the backward, for analyses of per-position parameter gradients (docs/model.md §9
// gradient routing). Its pointers are the backend's memory (analyses run on the CPU). Rows are slots b·S + stream·T + t (S = streams·T) from first_row on, or,
// when readout is true (output norm, LM head), readout rows b·T + t.
template <typename T>
struct GradientObserver {
  virtual ~GradientObserver() = default;
  // The linear layer whose [out_dim, in_dim] weight starts at `param` in the flat parameter
  // buffer: its weight gradient is Σ_r dout_rᵀ·in_r over these rows. in: [rows, in_dim],
  // dout: [rows, out_dim], the gradient of the layer's output.
  virtual void linear(int64_t param, const T* in, const T* dout, int64_t first_row, int64_t rows,
                      int64_t in_dim, int64_t out_dim, bool readout) = 0;
  // The RMSNorm gain at `param`: its gradient is Σ_r dout_r ⊙ (x_r · rstd_r).
  virtual void norm(int64_t param, const T* x, const T* rstd, const T* dout, int64_t first_row,
                    int64_t rows, int64_t dim, bool readout) = 0;
  // The embedding table at `param`: row tokens[r] receives dout_r (all B·S slots).
  virtual void embedding(int64_t param, const int32_t* tokens, const T* dout, int64_t rows,
                         int64_t dim) = 0;
};

template <typename T>
struct BackwardOptions {
  // [B, T]: when set, d loss / d nll of readout row r is grad_scale · loss_weight[r] instead of
  // grad_scale · keep[r] / Σ keep (one-hot weights backpropagate a single position's loss).
  const double* loss_weight = nullptr;
  GradientObserver<T>* observer = nullptr;
  // Told, as the backward goes, that no later op of it writes the gradients at flat offsets
  // ≥ `offset` (ParamTable order): after each block, with the block's first offset (its
  // parameters and every later one's are done), and with 0 at the end. A data-parallel
  // step starts summing those gradients between processes while the earlier blocks run.
  std::function<void(int64_t offset)> gradients_done_from = nullptr;
};

struct StepResult {
  double loss = 0;       // Σ nll·keep / Σ keep (0 when nothing counts)
  int64_t kept = 0;      // Σ keep
  double nll_sum = 0;    // Σ nll·keep
  int64_t attention_pairs = 0;  // score pairs the attention computed, all layers
};

template <typename T>
class Model {
 public:
  // The weights start zeroed, or with `unset` uninitialised (never touched, so no page of
  // them is resident) for a caller that writes every tensor before use, e.g.
  // load_for_inference.
  enum class InitialWeights { zero, unset };
  explicit Model(const ModelConfig& config,
                 const ops::Backend<T>& backend = ops::cpu_backend<T>(),
                 InitialWeights initial = InitialWeights::zero);

  const ModelConfig& config() const { return config_; }
  const Family& family() const { return family_; }
  const ParamTable& params() const { return table_; }
  const ops::Backend<T>& backend() const { return backend_; }
  // The flat parameter and gradient buffers, in the backend's memory. The gradients are
  // allocated by the first zero_grads, forward_backward or grads() (inference never does).
  // Every write to the weights goes through a pointer from the non-const weights(), taken
  // after the last forward: handing it out tells the backend's GEMM copies of the weights
  // (bf16: backend.h GemmWeightCopies) that they changed, so the next GEMM converts them anew.
  T* weights() {
    if (gemm_weights_) gemm_weights_->changed();
    return weights_.data();
  }
  const T* weights() const { return weights_.data(); }
  // Weight matrices the backend has converted for its GEMMs so far (0 where it reads the
  // weights as they are): once per matrix per change of the weights.
  int64_t gemm_weight_conversions() const {
    return gemm_weights_ ? gemm_weights_->conversions() : 0;
  }
  T* grads();
  const T* grads() const { return grads_.data(); }

  void init_weights(uint64_t seed);
  void zero_grads();

  // For a process that only runs forwards and decode steps (generate, eval, serve and their
  // benchmarks): packs every block's projection weights and the tied embedding table into
  // the backend's packed layout (ops::pack_weight_rows) in `type`, whose kernel serves a
  // decode step's few rows and a prefill's many at the speed the weights stream. The flat
  // buffer's copies of those tensors are then released; weights() no longer holds them, and
  // training (grads, forward_backward) is refused. A backend without a packed layout keeps
  // the rows (f32 only: UserError for another type).
  void pack_for_inference(ops::WeightType type = ops::WeightType::f32);
  // The same straight from a weights file, for a model made with InitialWeights::unset:
  // read(offset, count, out) writes `count` weights of the flat order from `offset` on (they
  // may span tensors) into host memory. The projections are read and packed a few panels at
  // a time, so their fp32 values never take more memory than a few panels.
  using WeightReader = std::function<void(int64_t offset, int64_t count, T* out)>;
  void load_for_inference(ops::WeightType type, const WeightReader& read);
  bool packed() const { return packed_; }
  ops::WeightType weight_type() const { return weight_type_; }
  // How the decoders made over this model hold their KV cache (model/kv_cache.h): f32 (the
  // default, exact) or bf16 where the backend can (capabilities().bf16_kv_cache). An
  // inference setting, like the weight type; decoders made before a change keep theirs.
  void set_kv_type(KvType type);
  KvType kv_type() const { return kv_type_; }
  // Bytes the weights take as this model holds them (packed projections in their type).
  int64_t weight_bytes() const;
  // out[rows, out_dim] (+)= in · Wᵀ, W the projection at `offset` in params() (c_attn,
  // c_proj, gate_up, down_proj, or wte as the tied LM head) in whichever layout it is in;
  // `few_rows` (a decode step) takes ops::linear_decode_forward over BLAS for unpacked weights.
  void block_linear(T* out, const T* in, int64_t offset, int64_t rows, int64_t in_dim,
                    int64_t out_dim, bool accumulate, bool few_rows) const;
  // out[n, d] = the embeddings of tokens[0..n), in whichever layout wte is in.
  void embed(T* out, const int32_t* tokens, int64_t n) const;

  // Plans activation memory for up to `batch` sequences of `tokens` tokens: a training plan
  // (which serves forwards too) or, with training false, an inference plan unless a training
  // plan large enough is already in place. Called by forward and forward_backward when
  // needed; call it up front to keep allocation out of the step loop.
  void reserve(int64_t batch, int64_t tokens, bool training = true);
  // Bytes an inference plan for `batch` × `tokens` takes (what reserve(batch, tokens, false)
  // allocates on a model without a plan).
  __int128 inference_activation_bytes(int64_t batch, int64_t tokens) const;
  int64_t activation_bytes() const { return int64_t(acts_.size() * sizeof(T)); }
  // Per-block activation recomputation: keep only each block's input from the forward and
  // recompute the block's other activations just before its backward (one extra forward of
  // the blocks, activation memory ≈ L·rows·d + one block's worth). Results are bit-identical.
  void set_recompute(bool on);
  bool recompute() const { return recompute_; }
  // Returns the activation plan's memory; the next forward plans again.
  void release_activations();

  // One transformer block (docs/model.md §2), the one definition the training forward,
  // prefill and cached decode (model/decoder.h) run, in two halves around its attention, the
  // part that differs (attention_forward over a layout, attention_decode over a cache).
  // Buffers as BlockBuffers, [rows, width] each; a caller that keeps no h_mid, n2 or rstd2 of
  // its own passes h_in, n1 and rstd1 there (the block then runs in place).
  // Before the attention: n1 = RMSNorm(h_in), qkv = c_attn(n1), RoPE on q and k at
  // `positions` [rows] (below rope_positions()).
  void block_attention_input(int64_t l, const BlockBuffers<T*>& a, const int32_t* positions,
                             int64_t rows, bool few_rows) const;
  // After it: h_mid = h_in + c_proj(att); n2 = RMSNorm(h_mid); act = silu(gate(n2)) ⊙ up(n2),
  // gate|up one [2F, d] weight; then, unless h_next is null (recomputation needs the
  // activations only), h_next = h_mid + down(act). att is read only by c_proj, so h_next
  // may be att's buffer.
  void block_output(int64_t l, const BlockBuffers<T*>& a, const T* att, int64_t rows, T* h_next,
                    bool few_rows) const;
  // The RoPE tables cover positions [0, n) from now on (they only grow). A forward covers
  // its tokens; a decoder covers every position its shape can reach.
  void cover_rope_positions(int64_t n);
  int64_t rope_positions() const { return rope_positions_; }

  // Read-only views of a forward, for the prefill of cached generation (model/decoder.h):
  // layer l's q | k | v after RoPE, [B·S, 3d] stream-major (valid in ForwardOptions::
  // after_layer(l); plans that share one block's buffers overwrite it with the next block),
  // and the residual stream after the last layer (before output_norm), [B·S, d], in the
  // backend's memory.
  const T* layer_qkv(int64_t l) const { return layer_acts_[l].qkv; }
  const T* final_hidden() const { return h_out_; }

  // x, y: [B, T] token ids (validated against the vocabulary by the caller).
  StepResult forward(const int32_t* x, const int32_t* y, int64_t batch, int64_t tokens,
                     const ForwardOptions& options = {});
  // forward, then gradients of grad_scale · loss added into grads().
  StepResult forward_backward(const int32_t* x, const int32_t* y, int64_t batch,
                              int64_t tokens, double grad_scale = 1.0,
                              const BackwardOptions<T>& backward = {});

 private:
  using LayerActs = BlockBuffers<T*>;  // pointers into acts_
  StepResult run(const int32_t* x, const int32_t* y, int64_t B, int64_t T_, bool backward,
                 double grad_scale, const ForwardOptions& options,
                 const BackwardOptions<T>& backward_options);
  void lm_head(const int32_t* y, bool backward, double grad_scale, StepResult& result,
               const ForwardOptions& options, const BackwardOptions<T>& backward_options);
  // Block l's forward from layer_acts_[l].h_in; writes the block's output to h_next unless it
  // is null (recomputation needs the block's activations only), with last_readouts_only for
  // each sequence's last readout slot alone (last_readouts_forward). Returns the attention
  // pairs.
  int64_t layer_forward(int64_t l, T* h_next, bool last_readouts_only = false);
  void last_readouts_forward(int64_t l, T* h_next);
  void backward_layers(const BackwardOptions<T>& options);
  ops::AttentionLayout attention_layout() const;

  // Uploads the step's slot layout (tokens, positions, documents, readout targets).
  void upload_layout(const int32_t* y);
  ActivationPlanKind training_plan() const {
    return recompute_ ? ActivationPlanKind::training_recomputed : ActivationPlanKind::training;
  }

  ModelConfig config_;
  Family family_;
  ParamTable table_;
  const ops::Backend<T>& backend_;
  ops::DeviceBuffer<T> weights_{backend_}, grads_{backend_}, acts_{backend_};
  std::unique_ptr<ops::GemmWeightCopies> gemm_weights_;           // null: the GEMMs read weights_
  ops::DeviceBuffer<T> rope_cos_{backend_}, rope_sin_{backend_};  // [rope_positions_, D/2]
  int64_t rope_positions_ = 0;
  SlotLayout layout_;                       // the step's layout, built on the host
  std::vector<int32_t> host_positions_;     // [B·S] position of every slot
  // The layout on the device: slot tokens and positions [B·S], doc and doc_start [B·T],
  // readout targets [B·T].
  ops::DeviceBuffer<int32_t> slot_tokens_{backend_}, slot_positions_{backend_}, doc_{backend_},
      doc_start_{backend_}, readout_targets_{backend_};
  // The attention tile plan of the layout, for a backend that reads one (attention_tile()).
  ops::AttentionTilePlan tile_plan_;
  ops::DeviceBuffer<ops::TileKind> tile_kinds_{backend_};
  // The slot tokens grouped by token, for a backend whose embedding backward reads them
  // (embedding_run_rows()).
  ops::TokenRowPlan token_rows_plan_;
  ops::DeviceBuffer<int32_t> token_rows_{backend_};
  // last_readouts_forward's rows: [to | from] offsets of its gather (its scatter swaps them).
  ops::DeviceBuffer<int64_t> last_readout_offsets_{backend_};
  std::vector<T> host_rows_;  // the LM head's per-row values crossing to or from the host
  int64_t planned_batch_ = 0, planned_tokens_ = 0;  // the shape acts_ was planned for
  ActivationPlanKind planned_kind_ = ActivationPlanKind::inference;
  bool recompute_ = false;
  bool packed_ = false;
  ops::WeightType weight_type_ = ops::WeightType::f32;
  KvType kv_type_ = KvType::f32;
  // The packed projections: each one's flat offset and its place in packed_weights_.
  struct PackedProjection {
    int64_t offset, in_dim, out_dim, packed_at;
  };
  std::vector<PackedProjection> projections() const;
  void pack_projections(ops::WeightType type, const WeightReader& read);
  const PackedProjection& packed_projection(int64_t offset) const;
  std::vector<PackedProjection> packed_projections_;
  ops::DeviceBuffer<uint8_t> packed_weights_{backend_};
  std::vector<LayerActs> layer_acts_;
  T *h_out_ = nullptr, *nf_ = nullptr, *rstdf_ = nullptr, *logits_ = nullptr, *lse_head_ = nullptr,
    *nll_ = nullptr;
  T *dh_ = nullptr, *dn_ = nullptr, *dqkv_ = nullptr, *datt_ = nullptr, *dgate_up_ = nullptr,
    *dact_ = nullptr, *dnf_ = nullptr;
  int64_t batch_ = 0, tokens_ = 0;
};

// Rows of the LM head computed at once on `device`, which bound the logits buffer to
// rows × V: few on the CPU, where a chunk's logits stay in its caches; many on a GPU, where
// each chunk's three GEMMs (and the bf16 copies of the embedding table they make) should be
// large enough to be worth their launches.
int64_t lm_head_chunk_rows(const ops::Device& device);

// Bytes of the activation plan of this kind Model<float>::reserve(batch, tokens, …) allocates
// on `device`.
int64_t planned_activation_bytes(const ModelConfig& config, int64_t batch, int64_t tokens,
                                 ActivationPlanKind kind, const ops::Device& device = {});

}  // namespace sps
