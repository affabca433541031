#pragma once
// Continuous batching over the cached decoder (model/decoder.h). One thread owns the model:
// each turn it admits waiting jobs (prefill, then fork into free decode rows), samples the
// next token of every live row, retires finished or cancelled rows at once, and feeds the
// rest one decode step together. So requests join and leave the running batch at step
// boundaries, and a turn prefills at most `prefill_tokens_per_turn` prompt tokens (at least
// one prompt) so running rows keep flowing while new prompts arrive. A prompt longer than
// that budget still runs as one forward, but the forward pauses between its layers for a
// decode step of the running rows after each budget's worth of work (the budget's tokens
// through every layer), so a long prompt does not stall the streams already running.
//
// Same tokens as `sps generate`: a job's prompt is prefilled alone (batch 1, the same
// training forward as `sps generate` of that prompt); choice i samples with its own sampler
// stream TokenSampler::row_rng(seed, i) (row i of `sps generate`), stops by the generator's
// rule (infer/stop_rule.h, max_tokens its length); on the CPU, decode steps compute each row
// independently of the others (the block projections and the tied LM head multiply packed
// weights, ops::linear_packed_forward, whose every output is the same chain of operations
// whatever the number of rows; a GPU's GEMMs promise no such thing).
//
// Prompts are prefilled whole: splitting one prompt's tokens over several turns (extends)
// gives slightly different floating-point logits than `sps generate`'s prefill, so the
// forward is split by layers instead, which changes nothing it computes.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "infer/generator.h"
#include "infer/token_logprob.h"
#include "infer/token_sampler.h"
#include "model/decoder.h"
#include "model/model.h"
#include "serve/metrics.h"
#include "tokenizer/bpe.h"

namespace sps::serve {

struct SchedulerOptions {
  int64_t rows = 4;                        // decode rows (--parallel)
  int64_t queue_limit = 64;                // jobs waiting for rows; more are refused
  int64_t context = 0;                     // positions per row (prompt + generated)
  int64_t prefill_tokens_per_turn = 512;   // prompt tokens prefilled between decode steps
};

using TokenLogprob = ::sps::TokenLogprob;  // infer/token_logprob.h

// What one choice produced since the last take().
struct ChoiceUpdate {
  int64_t choice = 0;
  std::string text;                 // text that became final
  std::vector<TokenLogprob> tokens; // tokens sampled (logprob fields set when asked)
  bool finished = false;
  StopReason reason = StopReason::length;
};

// One request: a prompt and n choices. Fill the request fields, submit, then take() updates
// from any thread until finished().
class Job {
 public:
  std::vector<int32_t> prompt;    // at least one token, at most the model's block_size
  int64_t max_tokens = 16;        // per choice; prompt + max_tokens <= context
  int64_t n = 1;                  // choices (rows), <= the scheduler's rows
  std::unique_ptr<TokenSampler> sampler;  // checked options (seed included)
  std::vector<std::string> stop;
  int64_t logprobs = -1;          // top alternatives per token; -1: no logprobs
  bool score_prompt = false;      // also the prompt tokens' logprobs (echo)
  bool stop_at_eos = true;        // false: EOS starts a new document and the choice goes on

  struct Taken {
    std::vector<ChoiceUpdate> updates;
    std::optional<std::vector<TokenLogprob>> prompt_logprobs;  // once, when scored
    bool finished = false;  // every choice finished (or the job was cancelled)
    bool cancelled = false;
  };
  // Waits up to `timeout` for something new, then returns it.
  Taken take(std::chrono::milliseconds timeout);
  void cancel();  // the client went away: its rows are freed at the next step
  bool cancelled() const { return cancelled_; }

 private:
  friend class Scheduler;
  void post(ChoiceUpdate update);
  void post_prompt_logprobs(std::vector<TokenLogprob> logprobs);
  void finish_all();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<ChoiceUpdate> updates_;
  std::optional<std::vector<TokenLogprob>> prompt_logprobs_;
  int64_t choices_finished_ = 0;
  bool finished_ = false;
  std::atomic<bool> cancelled_{false};
  double submitted_at_ = 0;
};

class Scheduler {
 public:
  // `model` and `tokenizer` must outlive the scheduler; the thread starts at once. Every
  // buffer it will use is allocated here (decoders, their KV caches, the prefill's
  // activations), so a shape that does not fit is a UserError now, not later.
  Scheduler(Model<float>& model, const BpeTokenizer& tokenizer, SchedulerOptions options,
            Metrics& metrics);
  ~Scheduler();

  // Queues every job of one request, or none: false when they do not all fit the queue or
  // the scheduler is draining. More jobs than the whole queue (options().queue_limit) can
  // never fit: the caller refuses such a request outright.
  bool submit(const std::vector<std::shared_ptr<Job>>& jobs);
  // Stops taking jobs, lets queued and running ones finish for up to `grace`, cancels the
  // rest, and ends the thread.
  void drain(std::chrono::milliseconds grace);

  Gauges gauges() const;
  const SchedulerOptions& options() const { return options_; }

  // Bytes the constructor allocates on the model's backend for `options` (decoders, KV
  // caches, the longest prompt's prefill activations), checked all at once.
  static __int128 memory_bytes(const Model<float>& model, const SchedulerOptions& options);

 private:
  struct Row;
  // The scheduler's three decoders: the batch of `rows`, one prompt's prefill, and the
  // token-by-token scoring of an echo request.
  struct DecoderShapes {
    int64_t max_prompt = 0;
    DecoderShape main, prefill, scoring;
  };
  static DecoderShapes decoder_shapes(const ModelConfig& config, const SchedulerOptions& options);
  void run();
  void admit(std::shared_ptr<Job> job);
  void score_prompt(Job& job);
  void sample_rows();
  void retire_rows();
  void decode_turn();
  TokenLogprob token_logprob(const float* logits, int32_t id, int64_t top) const;

  static constexpr int64_t kScoreChunk = 8;  // prompt tokens per extend when scoring

  Model<float>& model_;
  const BpeTokenizer& tokenizer_;
  SchedulerOptions options_;
  Metrics& metrics_;
  int64_t max_prompt_ = 0;

  // Shared with submitters.
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool draining_ = false, stop_ = false;
  std::atomic<int64_t> active_rows_{0}, kv_bytes_in_use_{0};

  // The scheduler thread's own.
  std::unique_ptr<Decoder<float>> decoder_, prefill_decoder_, score_decoder_;
  std::vector<Row> rows_;  // live rows, decoder rows [0, rows_.size())
  std::vector<int32_t> step_tokens_;
  std::thread thread_;
};

}  // namespace sps::serve
