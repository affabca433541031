#include "train/trainer.h"

#include <fcntl.h>
#include <omp.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "data/sampler.h"
#include "data/token_file.h"
#include "ops/backend.h"
#include "train/checkpoint.h"
#include "train/plan.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/progress.h"
#include "util/stop_signals.h"
#include "util/writer_lock.h"
#include "util/process_stats.h"
#include "util/rng.h"

namespace sps {

namespace fs = std::filesystem;

namespace {

// ---- output ----------------------------------------------------------------------------
// metrics.jsonl, appended line by line (rank 0 only). Opening keeps the first `keep_bytes`
// (a resume drops the lines written after its checkpoint).
class MetricsFile {
 public:
  MetricsFile() = default;
  MetricsFile(const MetricsFile&) = delete;
  MetricsFile& operator=(const MetricsFile&) = delete;
  void open(const std::string& path, int64_t keep_bytes) {
    path_ = path;
    std::error_code ec;
    const int64_t size = fs::exists(path, ec) ? int64_t(fs::file_size(path, ec)) : 0;
    bytes_ = std::min(size, keep_bytes);
    if (size > bytes_) fs::resize_file(path, uintmax_t(bytes_), ec);
    if (ec) fail("{}: cannot truncate: {}", path, ec.message());
    file_ = std::fopen(path.c_str(), bytes_ > 0 ? "ab" : "wb");
    if (!file_) fail("{}: cannot open for writing", path);
  }
  ~MetricsFile() {
    if (file_) std::fclose(file_);
  }
  void write(const nlohmann::ordered_json& record) {
    if (!file_) return;
    const std::string text = record.dump() + "\n";
    if (std::fwrite(text.data(), 1, text.size(), file_) != text.size() || std::fflush(file_) != 0)
      fail("{}: cannot write (disk full?)", path_);
    bytes_ += int64_t(text.size());
  }
  int64_t bytes() const { return bytes_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  int64_t bytes_ = 0;
};


std::string named_checkpoint(int64_t tokens) { return fmt::format("tokens_{:012}", tokens); }

}  // namespace

double pooled_nll(Model<float>& model, const TokenFile& file, const std::vector<int64_t>& starts,
                  int64_t micro_batch, std::vector<int32_t>& x, std::vector<int32_t>& y,
                  std::vector<int32_t>& row, const ProgressCallback& progress) {
  const int64_t T = model.config().block_size, V = model.config().vocab_size;
  double nll_sum = 0;
  int64_t kept = 0;
  for (size_t first = 0; first < starts.size(); first += size_t(micro_batch)) {
    const int64_t b = std::min<int64_t>(micro_batch, int64_t(starts.size() - first));
    for (int64_t k = 0; k < b; ++k) {
      file.read(starts[first + k], T + 1, row.data(), V);
      std::copy(row.begin(), row.begin() + T, x.begin() + k * T);
      std::copy(row.begin() + 1, row.begin() + T + 1, y.begin() + k * T);
    }
    const StepResult r = model.forward(x.data(), y.data(), b, T);
    nll_sum += r.nll_sum;
    kept += r.kept;
    if (progress) progress(int64_t(first) + b, int64_t(starts.size()));
  }
  return kept > 0 ? nll_sum / double(kept) : 0.0;
}

std::vector<int64_t> validation_windows(int64_t file_tokens, int64_t block_size,
                                        int64_t eval_total_tokens, uint64_t seed) {
  const int64_t starts = file_tokens - block_size;  // p in [0, N − T − 1]
  SPS_ASSERT(starts >= 1);
  const int64_t budget = std::min(eval_total_tokens, file_tokens - 1);
  const int64_t count = std::max<int64_t>(1, (budget + block_size - 1) / block_size);
  Rng rng(seed);
  std::vector<int64_t> result(count);
  for (auto& p : result) p = int64_t(rng.below(uint64_t(starts)));
  return result;
}

template <typename T>
StepOutcome train_step(Model<T>& model, AdamW& optimizer, Collective& collective,
                       int64_t micro_batch, int64_t accumulation, const BatchSource& batches,
                       std::vector<int32_t>& x, std::vector<int32_t>& y, double lr,
                       double grad_clip, double vote) {
  const int64_t tokens = model.config().block_size;
  const int64_t P = model.params().total();
  const double scale = 1.0 / double(accumulation * collective.size());
  model.zero_grads();
  double stats[4] = {0, 0, 0, vote};  // Σ micro-batch losses, Σ nll, Σ kept, votes
  for (int64_t m = 0; m < accumulation; ++m) {
    batches(m, x.data(), y.data());
    const StepResult r = model.forward_backward(x.data(), y.data(), micro_batch, tokens, scale);
    stats[0] += r.loss;
    stats[1] += r.nll_sum;
    stats[2] += double(r.kept);
  }
  if (collective.size() > 1) {
    ops::on_host(model.backend(), model.grads(), size_t(P), ops::HostAccess::read_write,
                 [&](T* grads) { collective.allreduce_sum(grads, P); });
    collective.allreduce_sum(stats, 4);
  }
  StepOutcome out;
  out.loss = stats[0] / double(accumulation * collective.size());
  out.nll_sum = stats[1];
  out.kept = int64_t(stats[2]);
  out.votes = stats[3];
  out.grad_norm = global_grad_norm(model.backend(), model.grads(), P);
  out.finite = std::isfinite(out.loss) && std::isfinite(out.grad_norm);
  if (!out.finite) return out;
  out.clip = clip_coefficient(out.grad_norm, grad_clip);
  optimizer.update(model.backend(), model.weights(), model.grads(), lr, out.clip);
  return out;
}

template StepOutcome train_step<float>(Model<float>&, AdamW&, Collective&, int64_t, int64_t,
                                       const BatchSource&, std::vector<int32_t>&,
                                       std::vector<int32_t>&, double, double, double);
template StepOutcome train_step<double>(Model<double>&, AdamW&, Collective&, int64_t, int64_t,
                                        const BatchSource&, std::vector<int32_t>&,
                                        std::vector<int32_t>&, double, double, double);

TrainSummary train(const TrainConfig& config, Collective& collective,
                   const TrainOptions& options) {
  const ModelConfig& mc = config.model;
  const auto& tc = config.training;
  const int rank = collective.rank(), ranks = collective.size();
  const bool leader = rank == 0;
  if (config.system.threads > 0) omp_set_num_threads(int(config.system.threads));
  const int64_t A = accumulation_steps(config, ranks);
  const int64_t B = tc.micro_batch_size, T = mc.block_size, V = mc.vocab_size;
  const int64_t tokens_per_step = config.tokens_per_step();
  const int64_t total_steps = config.total_steps();
  const std::string run_dir = config.system.out_dir;
  const std::string config_yaml = train_config_yaml(config);
  // Lines on stdout and the progress on stderr, from rank 0 unless --quiet. An error unwinds
  // the reporter first, so its message starts on a clean line.
  const bool talk = leader && !options.quiet;
  ProgressOptions progress_options;
  progress_options.unit = "tokens";
  progress_options.mode = talk ? ProgressMode::automatic : ProgressMode::off;
  ProgressReporter progress("train", progress_options);
  auto say = [&](const std::string& text) {
    if (talk) progress.print(stdout, text);
  };

  // ---- data ----
  const std::string dataset_dir =
      config.data.dataset.empty() ? fs::path(config.data.train_bin).parent_path().string()
                                  : config.data.dataset;
  const DatasetMeta meta = read_dataset_meta(dataset_dir.empty() ? "." : dataset_dir);
  std::string dtype_name = config.data.dtype;
  if (!meta.dtype.empty()) {
    if (!dtype_name.empty() && dtype_name != meta.dtype)
      fail("{}: data.dtype is {}, but {} says {}", config.source, dtype_name, meta.path, meta.dtype);
    dtype_name = meta.dtype;
  }
  const TokenDType dtype = token_dtype_from_name(dtype_name.empty() ? "uint16" : dtype_name,
                                                 meta.path.empty() ? "data.dtype" : meta.path + ": dtype");
  if (meta.eos_token_id >= 0 && meta.eos_token_id != mc.eos_token_id)
    fail("{}: eos_token_id {} differs from model.eos_token_id {} of {} (data from another "
         "tokenizer?)",
         meta.path, meta.eos_token_id, mc.eos_token_id, config.source);
  if (meta.vocab_size > mc.vocab_size)
    fail("{}: vocab_size {} exceeds model.vocab_size {} of {}", meta.path, meta.vocab_size,
         mc.vocab_size, config.source);
  const TokenFile train_file(config.data.train_bin, dtype);
  // Ids beyond the tokenizer's (PREDICT and PAD included) must not occur in data.
  const int64_t id_limit = meta.vocab_size > 0 ? meta.vocab_size : V;
  const std::string vocabulary = meta.vocab_size > 0 ? "the tokenizer's ids (" + meta.path + ")"
                                                     : "the model's vocabulary";
  train_file.check_ids(id_limit, vocabulary, meta.known_max_id(train_file));
  SamplerConfig sampler_config;
  sampler_config.type = sampler_type_from_name(tc.sampler_type, config.source + ": training.sampler_type");
  sampler_config.block_size = T;
  sampler_config.chunk_size_units = tc.chunk_size_units;
  sampler_config.shuffle_seed = uint64_t(tc.chunk_shuffle_seed);
  sampler_config.start_offset = tc.sampler_start_offset;
  sampler_config.rank = rank;
  sampler_config.ranks = ranks;
  const WindowSampler sampler(train_file.size(), sampler_config, config.data.train_bin);
  std::unique_ptr<TokenFile> val_file;
  std::vector<int64_t> val_windows;
  const bool evaluating = tc.eval_total_tokens > 0;
  if (evaluating && leader) {
    val_file = std::make_unique<TokenFile>(config.data.val_bin, dtype);
    val_file->check_ids(id_limit, vocabulary, meta.known_max_id(*val_file));
    if (val_file->size() < T + 1)
      fail("{}: {} tokens, fewer than one window of block_size + 1 = {}", config.data.val_bin,
           val_file->size(), T + 1);
    val_windows = validation_windows(val_file->size(), T, tc.eval_total_tokens,
                                     uint64_t(tc.eval_seed));
  }

  // ---- model, optimizer, state ----
  const ops::Device device = ops::parse_device(config.system.device, "system.device");
  if (device.kind != ops::Device::Kind::cpu && ranks > 1)
    fail("{}: system.device={} with {} processes: multi-GPU training (NCCL) is not built yet; "
         "train on one GPU or on the CPU",
         config.source, config.system.device, ranks);
  const ops::Backend<float>& backend = ops::backend_for(device);
  const TrainPlan plan = make_train_plan(config, ranks);
  backend.require(__int128(plan.memory_bytes()),
                  fmt::format("{}: the run's weights, gradients, AdamW moments and activations "
                              "(per process; system.recompute_activations=true needs fewer)",
                              config.source));
  Model<float> model(mc, backend);
  model.set_recompute(config.system.recompute_activations);
  const ParamTable& table = model.params();
  const int64_t P = table.total();
  AdamW optimizer(table, config.optimizer, model.backend());
  TrainerState state = initial_trainer_state(config, ranks);
  state.threads = omp_get_max_threads();

  std::string resumed_from;
  std::optional<WriterLock> lock;  // one trainer per run folder, for the whole run
  if (leader) {
    std::error_code ec;
    fs::create_directories(run_dir, ec);
    if (ec) fail("{}: cannot create the run folder: {}", run_dir, ec.message());
    lock.emplace(folder_lock_path(run_dir), run_dir);
    remove_unfinished_checkpoints(run_dir);
    std::vector<std::string> skipped;
    const std::string newest = find_newest_checkpoint(run_dir, &skipped);
    if (options.resume)
      for (const std::string& note : skipped) std::fprintf(stderr, "sps: %s\n", note.c_str());
    const std::string metrics_path = (fs::path(run_dir) / "metrics.jsonl").string();
    if (!options.resume && (!newest.empty() || (fs::exists(metrics_path, ec) &&
                                                fs::file_size(metrics_path, ec) > 0)))
      fail("{}: already holds a run{}; pass --resume to continue it, or choose another "
           "system.out_dir",
           run_dir, newest.empty() ? "" : " (" + fs::path(newest).filename().string() + ")");
    if (options.resume && !newest.empty()) {
      ops::on_host(model.backend(), model.weights(), size_t(P), ops::HostAccess::write,
                   [&](float* weights) {
                     state = load_checkpoint(newest, config, ranks, table, weights, optimizer);
                   });
      resumed_from = newest;
    }
  }
  int64_t resumed = resumed_from.empty() ? 0 : 1;
  if (ranks > 1) {
    double flag = double(resumed);
    collective.broadcast(&flag, sizeof flag, 0);
    resumed = int64_t(flag);
  }
  if (resumed) {
    if (ranks > 1) {  // CPU memory: multi-process training runs on the CPU
      collective.broadcast(model.weights(), P * int64_t(sizeof(float)), 0);
      collective.broadcast(optimizer.exp_avg(), P * int64_t(sizeof(float)), 0);
      collective.broadcast(optimizer.exp_avg_sq(), P * int64_t(sizeof(float)), 0);
      std::string text = trainer_state_json(state);
      int64_t length = int64_t(text.size());
      collective.broadcast(&length, sizeof length, 0);
      text.resize(size_t(length));
      collective.broadcast(text.data(), length, 0);
      state = trainer_state_from_json(text, "trainer state from rank 0");
      optimizer.set_step(state.step);
    }
  } else {
    model.init_weights(uint64_t(tc.seed));
  }
  model.reserve(B, T);

  MetricsFile metrics;
  if (leader) {
    write_file_atomically((fs::path(run_dir) / "config.yaml").string(), config_yaml);
    metrics.open((fs::path(run_dir) / "metrics.jsonl").string(), resumed ? state.metrics_bytes : 0);
  }

  say(fmt::format(
      "sps train {} → {}: {}{} ({:.2f}M parameters), {} steps × {} tokens, micro-batch {} × "
      "{} accumulation × {} process{}, {} thread{}",
      config.source, run_dir, mc.family,
      model.family().interleaved ? fmt::format(" w={}", mc.window_size) : "",
      double(plan.parameters) / 1e6,
      total_steps, tokens_per_step, B, A, ranks, ranks == 1 ? "" : "es", omp_get_max_threads(),
      omp_get_max_threads() == 1 ? "" : "s"));
  if (resumed && state.step >= total_steps) {
    say(fmt::format("{} finished at step {} ({} tokens); nothing to do (raise "
                    "training.max_tokens to train on)",
                    run_dir, state.step, state.tokens));
    TrainSummary done;
    done.step = state.step;
    done.tokens = state.tokens;
    done.finished = true;
    return done;
  }
  if (resumed) {
    say(fmt::format("resumed from {} at step {} ({} tokens)", resumed_from, state.step,
                    state.tokens));
    if (state.reason == kImportedReason)
      say("an imported checkpoint: the weights, AdamW moments and step are the other "
          "trainer's; the data from here on come in sps's sampler order, not in the "
          "order that trainer would have read them");
    // A step's sums are split over the threads, so another thread count changes the last
    // bits of every step from here on: the run goes on correctly, but not bit-identically.
    if (leader && state.threads > 0 && state.threads != omp_get_max_threads())
      std::fprintf(stderr,
                   "sps: warning: %s was written with %d thread%s per process, this run has %d; "
                   "the continuation is not bit-identical to an uninterrupted run (set "
                   "system.threads=%d for that)\n",
                   resumed_from.c_str(), state.threads, state.threads == 1 ? "" : "s",
                   omp_get_max_threads(), state.threads);
    state.threads = omp_get_max_threads();
  }
  else if (options.resume)
    say(fmt::format("no checkpoint in {}; starting from scratch", run_dir));

  // ---- the loop ----
  StopSignals signals;
  std::vector<int32_t> x(B * T), y(B * T), row(T + 1);
  const BatchSource batches = [&](int64_t micro, int32_t* xs, int32_t* ys) {
    for (int64_t b = 0; b < B; ++b) {
      const int64_t index = state.windows_per_rank + micro * B + b;
      train_file.read(sampler.position(index), T + 1, row.data(), id_limit);
      std::copy(row.begin(), row.begin() + T, xs + b * T);
      std::copy(row.begin() + 1, row.begin() + T + 1, ys + b * T);
    }
  };

  TrainSummary summary;
  const int64_t first_step = state.step;
  progress.skip(state.tokens);  // a resumed run's tokens are not in its rate
  double train_seconds = 0, interval_seconds = 0;
  int64_t interval_tokens = 0;
  double last_val = -1, stop_votes = 0;
  double mark = now_seconds();
  auto checkpoint = [&](const std::string& name, const char* reason) {
    if (!leader) return;
    if (!std::isfinite(model.backend().sum_squares(model.weights(), P)))
      fail("step {}: the weights are not finite; stopping without writing checkpoints/{} (the "
           "last good checkpoint stays)",
           state.step, name);
    state.reason = reason;
    state.metrics_bytes = metrics.bytes();
    ops::on_host(model.backend(), std::as_const(model).weights(), size_t(P),
                 ops::HostAccess::read, [&](const float* weights) {
                   write_checkpoint(run_dir, name, table, weights, optimizer, config, state);
                 });
  };
  auto evaluate = [&]() {
    const double t0 = now_seconds();
    if (leader) {
      last_val = finite_or_fail(pooled_nll(model, *val_file, val_windows, B, x, y, row),
                                fmt::format("step {}: validation NLL", state.step));
      const double seconds = now_seconds() - t0;
      nlohmann::ordered_json record;
      record["step"] = state.step;
      record["tokens"] = state.tokens;
      record["val_nll"] = last_val;
      record["eval_seconds"] = seconds;
      metrics.write(record);
      say(fmt::format("step {}/{}  {} tokens  val NLL {:.4f}  ({} windows, {:.1f} s)",
                      state.step, total_steps, state.tokens, last_val,
                      val_windows.size(), seconds));
    }
    return now_seconds() - t0;
  };

  bool evaluated_here = false;
  for (;;) {
    // ---- step boundary: state.step steps done ----
    const int64_t steps_now = state.step - first_step;
    if (state.step < total_steps &&
        (stop_votes > 0 || (options.stop_after_steps > 0 && steps_now >= options.stop_after_steps))) {
      checkpoint("latest", "interrupted");
      say(fmt::format("stopped at step {} ({} tokens); checkpoint {}/latest; continue "
                      "with --resume",
                      state.step, state.tokens, checkpoints_dir(run_dir)));
      summary.interrupted = true;
      break;
    }
    evaluated_here = false;
    if (evaluating && state.tokens >= state.next_eval_tokens) {
      const double seconds = evaluate();
      mark += seconds;  // evaluation time is not training time
      evaluated_here = true;
      while (state.next_eval_tokens <= state.tokens)
        state.next_eval_tokens = tc.eval_interval_tokens > 0
                                     ? state.next_eval_tokens + tc.eval_interval_tokens
                                     : kNever;
    }
    if (state.step >= total_steps) {
      if (evaluating && !evaluated_here) mark += evaluate();
      checkpoint("final", "final");
      say(fmt::format(
          "finished: {} steps, {} tokens{}, {:.0f} tokens/s (evaluation excluded); checkpoint "
          "{}/final",
          state.step, state.tokens,
          last_val >= 0 ? fmt::format(", val NLL {:.4f}", last_val) : "",
          train_seconds > 0 ? double((state.step - first_step) * tokens_per_step) / train_seconds : 0.0,
          checkpoints_dir(run_dir)));
      summary.finished = true;
      break;
    }
    if (state.step > 0) {
      std::vector<std::pair<std::string, const char*>> due;
      if (state.tokens >= state.next_save_tokens) {
        due.push_back({named_checkpoint(state.tokens), "named"});
        while (state.next_save_tokens <= state.tokens) state.next_save_tokens += tc.save_every;
      }
      const int64_t decay_start = config.decay_start_tokens();
      if (decay_start >= 0 && !state.pre_decay_saved && state.tokens >= decay_start) {
        due.push_back({"pre_decay", "pre_decay"});
        state.pre_decay_saved = true;
      }
      if (state.tokens >= state.next_rolling_tokens) {
        due.push_back({"latest", "latest"});
        while (state.next_rolling_tokens <= state.tokens)
          state.next_rolling_tokens += tc.rolling_save_every;
      }
      for (const auto& [name, reason] : due) checkpoint(name, reason);
    }

    // ---- step state.step ----
    const double lr = scheduled_learning_rate(state.step, tokens_per_step, tc.max_tokens,
                                              config.optimizer, config.scheduler);
    const StepOutcome out = train_step(model, optimizer, collective, B, A, batches, x, y, lr,
                                       config.optimizer.grad_clip,
                                       signals.requested() ? 1.0 : 0.0);
    if (!out.finite)
      fail("step {}: the {} is not finite (loss {}, gradient norm {}); stopping. The last good "
           "checkpoint is kept; lower optimizer.learning_rate or check the data",
           state.step, std::isfinite(out.loss) ? "gradient" : "loss", out.loss, out.grad_norm);
    state.step += 1;
    state.tokens = state.step * tokens_per_step;
    state.windows_per_rank += A * B;
    // All ranks stop at the same boundary: with several, on the votes the step exchanged.
    stop_votes = ranks == 1 ? (signals.requested() ? 1.0 : 0.0) : out.votes;

    const double now = now_seconds();
    interval_seconds += now - mark;
    train_seconds += now - mark;
    mark = now;
    interval_tokens += tokens_per_step;
    if (leader && (state.step % tc.log_interval == 0 || state.step == total_steps)) {
      nlohmann::ordered_json record;
      record["step"] = state.step;
      record["tokens"] = state.tokens;
      record["lr"] = lr;
      record["loss"] = out.loss;
      record["grad_norm"] = out.grad_norm;
      record["tokens_per_second"] = double(interval_tokens) / interval_seconds;
      record["peak_rss_bytes"] = peak_rss_bytes();
      metrics.write(record);
      interval_tokens = 0;
      interval_seconds = 0;
    }
    progress.update(state.tokens, total_steps * tokens_per_step,
                    fmt::format("step {}/{} · loss {:.4f} · val {}", state.step, total_steps,
                                out.loss, last_val >= 0 ? fmt::format("{:.4f}", last_val) : "-"));
  }
  progress.finish();
  if (ranks > 1) collective.barrier();
  summary.step = state.step;
  summary.tokens = state.tokens;
  summary.val_nll = last_val;
  summary.tokens_per_second =
      train_seconds > 0 ? double((state.step - first_step) * tokens_per_step) / train_seconds : 0;
  return summary;
}

}  // namespace sps
