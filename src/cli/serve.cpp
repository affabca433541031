// sps serve --checkpoint DIR|RUN [--host 127.0.0.1] [--port 8080] [--parallel N] [--ctx T]
//           [--api-key KEY | --api-key-file F] [--device cpu|cuda[:N]]
// An OpenAI-style HTTP server over the cached decoder (docs/serving.md). SIGINT/SIGTERM stop
// it gracefully: no new completions, running ones get --grace seconds, then exit 0.
#include <omp.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "cli/commands.h"
#include "cli/model_files.h"
#include "model/kv_cache.h"
#include "ops/weight_type.h"
#include "serve/server.h"
#include "util/error.h"
#include "util/read_file.h"

namespace sps::cli {
namespace {

struct ServeArgs {
  std::string checkpoint, weights, config, tokenizer;
  std::string api_key, api_key_file, model_name;
  const CLI::Option* api_key_option = nullptr;  // given at all (an empty value included)?
  const DeviceChoice* on = nullptr;  // --device and --weight-type, read after parsing
  int threads = 0;
  double grace_seconds = 30, timeout_seconds = 10;
  serve::ServerOptions server;
};

// A key without the whitespace around it; empty or only whitespace is refused in one line,
// whichever flag gave it (an unset variable in `--api-key "$KEY"` must not open the server).
std::string checked_key(std::string key, const std::string& source) {
  const size_t first = key.find_first_not_of(" \t\r\n");
  if (first == std::string::npos)
    fail("{}: the API key is empty or only whitespace; give a real key, or leave out "
         "--api-key and --api-key-file for a server without one",
         source);
  return key.substr(first, key.find_last_not_of(" \t\r\n") + 1 - first);
}

void run_serve(ServeArgs& a) {
  const bool key_given = a.api_key_option->count() > 0;
  if (key_given && !a.api_key_file.empty()) fail("give --api-key or --api-key-file, not both");
  if (key_given) a.server.api_key = checked_key(a.api_key, "--api-key");
  if (!a.api_key_file.empty())
    a.server.api_key = checked_key(read_file(a.api_key_file, "the --api-key-file"),
                                   "--api-key-file " + a.api_key_file);
  a.server.connections.request_timeout =
      std::chrono::milliseconds(int64_t(a.timeout_seconds * 1000));
  if (a.threads > 0) omp_set_num_threads(a.threads);

  const LoadedModel loaded =
      load_model(a.checkpoint, a.weights, a.config, *a.on);
  const BpeTokenizer tokenizer = load_tokenizer(a.tokenizer, loaded);
  const ModelConfig& c = loaded.model->config();
  serve::SchedulerOptions& s = a.server.scheduler;
  if (s.context == 0) s.context = c.block_size;
  a.server.model_name = a.model_name.empty() ? c.family : a.model_name;

  // SIGINT and SIGTERM go to one waiting thread only: block them before any thread starts
  // (the server's, the scheduler's, OpenMP's) so every thread inherits the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  std::unique_ptr<serve::Server> made;
  try {
    made = std::make_unique<serve::Server>(*loaded.model, tokenizer, a.server);
  } catch (const UserError& e) {  // the rows and context do not fit: say which flags set them
    fail("--parallel {} with --ctx {}: {}", s.rows, s.context, e.what());
  }
  serve::Server& server = *made;
  const int port = server.bind();
  // Notes once everything is known to be good, so that an error stays one line.
  if (s.context > c.block_size)
    std::fprintf(stderr,
                 "sps: note: --ctx %lld is past the model's context of %lld tokens; positions "
                 "beyond it were never trained (prompts still fit %lld tokens)\n",
                 (long long)s.context, (long long)c.block_size, (long long)c.block_size);
  if (a.server.host != "127.0.0.1" && a.server.host != "localhost" && a.server.host != "::1" &&
      a.server.api_key.empty())
    std::fprintf(stderr, "sps: note: listening on %s without an API key\n", a.server.host.c_str());
  std::atomic<bool> over{false};
  std::thread watcher([&] {
    const timespec tick{0, 200'000'000};
    while (!over) {
      const int sig = sigtimedwait(&stop_signals, nullptr, &tick);
      if (sig == SIGINT || sig == SIGTERM) {
        std::fprintf(stderr, "sps serve: stopping (finishing running requests for up to %g s)\n",
                     a.grace_seconds);
        server.shutdown(std::chrono::milliseconds(int64_t(a.grace_seconds * 1000)));
        return;
      }
    }
  });
  std::fprintf(stderr,
               "sps serve: %s model '%s', %lld rows, context %lld, %s weights, %s KV cache, on "
               "http://%s:%d\n",
               c.family.c_str(), a.server.model_name.c_str(), (long long)s.rows,
               (long long)s.context, ops::weight_type_name(loaded.model->weight_type()),
               kv_type_name(loaded.model->kv_type()), a.server.host.c_str(), port);
  server.listen();
  over = true;
  watcher.join();
  std::fprintf(stderr, "sps serve: stopped\n");
}

}  // namespace

void register_serve(CLI::App& app) {
  static ServeArgs a;
  auto* cmd = app.add_subcommand(
      "serve", "an OpenAI-style HTTP server (completions, chat, tokenize, metrics) over the KV "
               "cache, with continuous batching (docs/serving.md)");
  cmd->add_option("--checkpoint", a.checkpoint,
                  "checkpoint folder (model.safetensors + config.yaml), or a run folder: its "
                  "newest checkpoint");
  cmd->add_option("--weights", a.weights, "weights (.safetensors), with --config");
  cmd->add_option("--config", a.config, "model config YAML (a model: section), with --weights");
  cmd->add_option("--tokenizer", a.tokenizer,
                  "gpt2, a folder with encoder.json + vocab.bpe, or a rank file (default: the "
                  "one the config records)");
  cmd->add_option("--host", a.server.host, "address to listen on (default 127.0.0.1: this machine only)");
  cmd->add_option("--port", a.server.port, "TCP port (0: any free port)")->check(CLI::Range(0, 65535));
  cmd->add_option("--parallel", a.server.scheduler.rows, "decode rows: choices generated at once")
      ->check(CLI::Range(int64_t(1), int64_t(1024)));
  cmd->add_option("--ctx", a.server.scheduler.context,
                  "positions per row, prompt + max_tokens (default: the model's block_size)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  cmd->add_option("--queue", a.server.scheduler.queue_limit,
                  "prompts waiting for rows; more are answered 503 with Retry-After")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  cmd->add_option("--prefill-tokens", a.server.scheduler.prefill_tokens_per_turn,
                  "prompt tokens of work between two decode steps: whole prompts per turn, and "
                  "a longer prompt's forward pauses between layers")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  a.api_key_option = cmd->add_option("--api-key", a.api_key, "require Authorization: Bearer KEY");
  cmd->add_option("--api-key-file", a.api_key_file, "read the API key from a file");
  cmd->add_option("--model-name", a.model_name, "the model id clients name (default: the family)");
  cmd->add_option("--max-body-bytes", a.server.connections.framing.max_body_bytes,
                  "larger request bodies: 413")
      ->check(CLI::Range(size_t(1), size_t(1) << 30));
  cmd->add_option("--timeout", a.timeout_seconds,
                  "seconds a request's headers may take from their first byte, again its body, "
                  "and each write of an answer; a late request is answered 408 and closed")
      ->check(CLI::Range(0.001, 3600.0));
  cmd->add_option("--max-connections", a.server.connections.max_connections,
                  "connections open at once, each with its own thread; more are answered 503")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--max-connections-per-client", a.server.connections.max_per_client,
                  "connections open at once from one client address; more are answered 503")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--grace", a.grace_seconds,
                  "seconds running requests get to finish after SIGINT/SIGTERM")
      ->check(CLI::Range(0.0, 3600.0));
  a.on = &add_device_and_weight_type_options(cmd, "sps serve");
  cmd->add_option("--threads", a.threads, "OpenMP threads (default: OMP_NUM_THREADS or all cores)")
      ->check(CLI::Range(0, 4096));
  cmd->callback([] { run_serve(a); });
}

}  // namespace sps::cli
