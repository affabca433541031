#pragma once
// Cached generation (docs/model.md §7): prefill with the training forward, then one decode step per
// new token over the KV cache (model/kv_cache.h), on the model's backend: the cache and every
// work buffer live in its memory, and the host only builds each step's tokens and positions.
//
// Prefill runs Model::forward over the left-padded prompts [B, P] (in groups of
// `prefill_rows` rows to bound activation memory), then copies each row's last document
// into its cache: the persistent slots' K (after RoPE) and V, and the last min(w, length)
// windowed slots' K/V into the ring. Logits come from each row's last readout slot.
//
// A decode step feeds each row one token at its next position: interleaved families forward
// the pair (token, PREDICT) together, standard the token alone, through the model's own block
// (Model::block_attention_input and block_output) with the decode attention in its middle:
// the step's query rows attend the cache plus the step's own keys (ops::attention_decode);
// then the persistent slot's K/V is appended and the windowed slot's K/V pushed into the ring.
// Logits come from the readout slot. After a row consumes EOS its cache is cleared at its
// next step; positions keep counting and never reset. An extend feeds K tokens per row in
// one pass (the linear layers then multiply K·Q rows per sequence at once, and the attention
// of each new token sees the cache plus the chunk's earlier keys): the same logits as K
// steps, for every fed position, at the cost of a forward over K tokens.
//
// Positions past the model's block_size: allowed. The decoder grows the model's RoPE tables
// to every position the shape can reach (the longest prompt plus max_new_tokens); a model
// trained on block_size tokens then runs on positions it never saw (RoPE extrapolation),
// which is the caller's choice (`sps generate` says so once on stderr). Only the prompt
// itself must fit block_size, because prefill is the training forward.
//
// Memory is planned by the constructor; prefill plans the model's activations for
// [prefill_rows, P]; decode steps allocate nothing.
#include <cstdint>
#include <functional>
#include <vector>

#include "model/kv_cache.h"
#include "model/model.h"
#include "model/slot_layout.h"
#include "util/error.h"

namespace sps {

// Slots (tokens × query rows) per prefill forward when DecoderShape::prefill_rows is 0.
inline constexpr int64_t kPrefillSlots = 1024;

struct DecoderShape {
  int64_t batch = 1;              // B rows generated together
  int64_t max_prompt_tokens = 1;  // the longest (left-padded) prompt prefill will see
  int64_t max_new_tokens = 0;     // tokens fed per row after prefill (steps and extends)
  int64_t max_chunk_tokens = 1;   // tokens per row one extend may feed
  // Rows per forward in prefill; 0 chooses as many as fit kPrefillSlots slots (at least one),
  // so a long prompt's activations stay one row's while short prompts still go together.
  int64_t prefill_rows = 0;
};

template <typename T>
class Decoder {
 public:
  Decoder(Model<T>& model, const DecoderShape& shape);

  // Bytes a decoder of this shape allocates on the model's backend: its KV cache, the growth
  // of the model's RoPE tables and its step buffers (the constructor refuses a shape whose bytes
  // are not available).
  static __int128 memory_bytes(const Model<T>& model, const DecoderShape& shape);

  // prompts: [B, P] token ids, each row left-padded with PAD and holding at least one real
  // token; P <= max_prompt_tokens and P <= block_size. Fills the caches and the logits of each
  // row's last token; resets the step count. `between_layers`, when set, runs after each
  // block of the forward but the last one's: a caller may do other work there (a server
  // decodes its running rows) as long as it leaves this model's activations alone; the
  // prefill's results do not change.
  void prefill(const int32_t* prompts, int64_t P,
               const std::function<void()>& between_layers = nullptr);

  // Row `row` continues from row `source_row` of `source` (a decoder of the same model after
  // its prefill): its cache, next position, last token and logits become that row's, as if
  // this decoder had prefilled its prompt. The source's prompt must fit max_prompt_tokens.
  // Lets the continuations of one prompt share a single prefill, and a server prefill each
  // new request on its own while other rows keep decoding.
  void fork(int64_t row, const Decoder& source, int64_t source_row);

  // Row `row` takes over row `from` of this decoder (cache, position, last token, logits), so a
  // caller can keep its live rows in a prefix (extend feeds the first `rows` rows).
  void move_row(int64_t row, int64_t from);

  // Feeds tokens[b] (ids below the vocabulary) to row b at its next position and computes the
  // logits that predict the token after it. A row's positions must stay below
  // max_prompt_tokens + max_new_tokens (the cache's capacity).
  void step(const int32_t* tokens) { extend(tokens, 1); }

  // Feeds tokens[b·K .. b·K+K) to row b at its next K positions, as K steps would, and
  // computes the logits after each of them. An EOS may only be a row's last token here (a
  // document ends with the chunk). 1 <= K <= max_chunk_tokens. With `rows` (1..batch) only
  // the first `rows` rows are fed (tokens and logits are then [rows, K]); the others keep
  // their state.
  void extend(const int32_t* tokens, int64_t K, int64_t rows = -1);

  // [B, K, V] ([rows, K, V] after an extend of fewer rows): the logits of the last call, K = 1
  // after prefill, fork and step, on the host (copied from a GPU on the first call after they
  // change; a caller that only takes top_k() never pays for that).
  const T* logits() const;
  // The k (1..ops::kMaxTopK) most likely ids of rows [first, first + rows) of the last call's
  // logits, which must hold one position per row (after prefill, step, or an extend of one
  // token), among the ids `banned` ([V]; nonzero: never) lets through: ids and their logits
  // [rows, k], most likely first and the lower id on a tie, and first_nonfinite [rows]
  // (ops::top_k_rows), on the host. Chosen where the logits are, so from a GPU only these
  // cross, not V logits per row. k = 1 is the greedy choice.
  void top_k(int64_t first, int64_t rows, int64_t k, const std::vector<uint8_t>& banned,
             int32_t* ids, T* values, int32_t* first_nonfinite);
  const KvCache<T>& cache() const { return cache_; }
  const DecoderShape& shape() const { return shape_; }
  int64_t vocab_size() const { return V_; }
  int64_t next_position(int64_t b) const { return next_position_[b]; }
  int64_t last_step_attention_pairs() const { return last_step_pairs_; }

 private:
  // logits_ now holds `rows` rows of V logits that logits() shows.
  void logits_changed(int64_t rows);

  Model<T>& model_;
  const ops::Backend<T>& backend_;
  DecoderShape shape_;
  int64_t Q_ = 1, V_ = 0, d_ = 0, F_ = 0, H_ = 0, D_ = 0, L_ = 0;
  // Which of a position's two rows (its streams, Family::persistent_stream) each is.
  int64_t persistent_stream_ = 0, window_stream_ = 0, readout_stream_ = 0;
  int64_t max_positions_ = 0;  // a row's positions stay below: the longest prompt plus new tokens
  KvCache<T> cache_;
  SlotLayout prompt_layout_;
  // A step's slot tokens [B·K·Q] then their positions [B·K·Q], built on the host.
  std::vector<int32_t> step_inputs_host_;
  ops::DeviceBuffer<int32_t> step_inputs_{backend_};
  ops::DeviceBuffer<T> h_{backend_}, n_{backend_}, rstd_{backend_}, qkv_{backend_},
      att_{backend_}, gate_up_{backend_}, act_{backend_};  // [B·K·Q, ·]
  ops::DeviceBuffer<T> nf_{backend_}, rstdf_{backend_}, logits_{backend_};  // [B·K, ·]
  int64_t logit_positions_ = 1;  // per row in logits_: the last extend's K, else 1
  int64_t logits_held_ = 0;      // rows of V logits in logits_
  // logits_ on the host, where the backend's memory is not: its first host_rows_ rows are
  // current.
  mutable std::vector<T> host_logits_;
  mutable int64_t host_rows_ = 0;
  // top_k()'s ids not to take (uploaded when they change), and its answer in one buffer, so
  // a device sends it in one copy: ids [rows·k], the rows' first non-finite ids [rows], then
  // the logits [rows·k] as T, from a word aligned for T.
  std::vector<uint8_t> banned_host_;
  ops::DeviceBuffer<uint8_t> banned_{backend_};
  ops::DeviceBuffer<int32_t> top_answer_{backend_};
  std::vector<int32_t> top_answer_host_;
  std::vector<int64_t> ring_next_;                           // [B] ring row of the next push
  // The decode attention's per-row counts, [3, B]: persistent and ring rows cached, the ring
  // row after the newest; on the host, then in the backend's memory.
  std::vector<int64_t> step_counts_host_;
  ops::DeviceBuffer<int64_t> step_counts_{backend_};
  // Interleaved families: the last layer's readout rows of h and att, [2, B·max_chunk, d],
  // gathered by copy_rows at these offsets ([to | from], the same every step).
  ops::DeviceBuffer<T> readout_{backend_};
  ops::DeviceBuffer<int64_t> readout_offsets_{backend_};
  ops::DeviceBuffer<int64_t> prefill_offsets_{backend_};     // prefill's readout rows, [to | from]
  std::vector<int64_t> next_position_;                       // [B]
  std::vector<int32_t> last_token_;                          // [B] last token consumed
  int64_t last_step_pairs_ = 0;
};

}  // namespace sps
