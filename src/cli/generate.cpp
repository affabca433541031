// sps generate --checkpoint DIR | --weights FILE --config FILE
//              --prompt TEXT | --prompt-file F | --batch-file F.jsonl [options]
// Streams generated text to stdout as tokens come; a JSONL batch mode; an interactive mode
// (one prompt per line) when no prompt is given and stdin is a terminal.
#include <fmt/format.h>
#include <omp.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/model_files.h"
#include "infer/generator.h"
#include "model/config.h"
#include "model/model.h"
#include "tokenizer/bpe.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/read_file.h"

namespace sps::cli {
namespace {

struct GenerateArgs {
  std::string checkpoint, weights, config;
  std::string prompt, prompt_file, batch_file, output;
  bool prompt_given = false;
  std::string tokenizer;
  std::string truncate = "none";
  int64_t batch_size = 8;
  int threads = 0;
  bool ignore_eos = false, stats = false;
  GenerationOptions generation;
  const DeviceChoice* on = nullptr;  // --device and --weight-type, read after parsing
};

void write_stdout(std::string_view bytes) {
  if (std::fwrite(bytes.data(), 1, bytes.size(), stdout) != bytes.size() || std::fflush(stdout) != 0)
    fail("cannot write standard output");
}

void print_stats(const GenerationStats& s) {
  const double decode_rate = s.decode_seconds > 0 ? double(s.decode_steps * s.batch) / s.decode_seconds : 0;
  std::fprintf(stderr,
               "sps: %lld prompt token(s), %lld generated; prefill %.1f ms, decode %.1f tokens/s "
               "(%lld step(s) of %lld row(s)); KV cache %.2f MiB allocated, %.2f MiB used\n",
               (long long)s.prompt_tokens, (long long)s.generated_tokens, 1e3 * s.prefill_seconds,
               decode_rate, (long long)s.decode_steps, (long long)s.batch,
               double(s.kv_cache_allocated_bytes) / 1048576.0,
               double(s.kv_cache_used_bytes) / 1048576.0);
}

// Positions past block_size were never trained; say so once.
void note_past_context(const ModelConfig& c, int64_t prompt_tokens, int64_t max_new, bool& noted) {
  if (noted || prompt_tokens + max_new <= c.block_size) return;
  noted = true;
  std::fprintf(stderr,
               "sps: note: prompt + --max-new-tokens may pass the model's context of %lld tokens; "
               "positions beyond it were never trained\n",
               (long long)c.block_size);
}

struct Session {
  const GenerateArgs& args;
  const ModelConfig& config;
  const BpeTokenizer& tokenizer;
  Generator& generator;
  bool noted = false;

  void note(const std::vector<std::string>& prompts) {
    int64_t longest = 1;
    for (const std::string& p : prompts)
      longest = std::max<int64_t>(longest, int64_t(tokenizer.encode(p).size()));
    if (args.truncate == "left") longest = std::min(longest, config.block_size);
    if (longest > config.block_size) return;  // generation refuses it with its own message
    note_past_context(config, longest, args.generation.max_new_tokens, noted);
  }

  // One prompt, its text streamed to stdout.
  void stream(const std::string& prompt) {
    note({prompt});
    const auto out = generator.generate_text({prompt}, [](int64_t, std::string_view piece) {
      write_stdout(piece);
    });
    write_stdout("\n");
    if (out[0].truncated)
      std::fprintf(stderr, "sps: note: the prompt was cut to its last %lld tokens\n",
                   (long long)config.block_size);
    if (args.stats) print_stats(generator.last_stats());
  }

  // JSON Lines in ({"prompt": "...", "id": any}), JSON Lines out, in batches of batch_size.
  void batch() {
    const std::string text = read_file(args.batch_file, "the --batch-file");
    struct Item {
      std::string prompt;
      nlohmann::json id;
      int64_t line = 0;
    };
    std::vector<Item> items;
    int64_t line_number = 0;
    size_t pos = 0;
    while (pos < text.size()) {
      size_t end = text.find('\n', pos);
      if (end == std::string::npos) end = text.size();
      const std::string line = text.substr(pos, end - pos);
      pos = end + 1;
      ++line_number;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception&) {
        fail("{}:{}: not valid JSON", args.batch_file, line_number);
      }
      if (!j.is_object() || !j.contains("prompt") || !j["prompt"].is_string())
        fail("{}:{}: expected an object with a \"prompt\" string", args.batch_file, line_number);
      items.push_back({j["prompt"].get<std::string>(), j.contains("id") ? j["id"] : nlohmann::json(),
                       line_number});
    }
    if (items.empty()) fail("{}: no prompts", args.batch_file);
    std::string all;
    for (size_t i0 = 0; i0 < items.size(); i0 += size_t(args.batch_size)) {
      const size_t i1 = std::min(items.size(), i0 + size_t(args.batch_size));
      std::vector<std::string> prompts;
      for (size_t i = i0; i < i1; ++i) prompts.push_back(items[i].prompt);
      note(prompts);
      const auto out = generator.generate_text(prompts);
      std::string lines;
      for (size_t i = i0; i < i1; ++i) {
        const Generation& g = out[i - i0];
        nlohmann::json j = {{"index", i},
                            {"prompt", items[i].prompt},
                            {"completion", g.text},
                            {"prompt_tokens", g.prompt.size()},
                            {"completion_tokens", g.tokens.size()},
                            {"completion_ids", g.tokens},
                            {"stop_reason", stop_reason_name(g.stop_reason)},
                            {"truncated", g.truncated}};
        if (!items[i].id.is_null()) j["id"] = items[i].id;
        lines += j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
      }
      if (args.stats) print_stats(generator.last_stats());
      if (args.output.empty() || args.output == "-")
        write_stdout(lines);
      else
        all += lines;
    }
    if (!args.output.empty() && args.output != "-") write_file_atomically(args.output, all);
  }

  // One prompt per line until end of input; each line is generated on its own (no memory of
  // earlier turns); an empty line starts from a new document.
  void interactive() {
    std::fprintf(stderr,
                 "sps generate: one prompt per line, Ctrl-D to quit (each line is a fresh prompt; "
                 "an empty line starts a new document)\n");
    std::string line;
    while (true) {
      std::fputs("> ", stderr);
      std::fflush(stderr);
      if (!std::getline(std::cin, line)) break;
      stream(line);
    }
    std::fputs("\n", stderr);
  }
};

void run_generate(GenerateArgs& a) {
  if (a.threads > 0) omp_set_num_threads(a.threads);
  const int sources = int(a.prompt_given) + int(!a.prompt_file.empty()) + int(!a.batch_file.empty());
  if (sources > 1) fail("give one of --prompt, --prompt-file and --batch-file");
  if (a.truncate != "none" && a.truncate != "left")
    fail("--truncate must be none or left, got '{}'", a.truncate);
  if (!a.output.empty() && a.batch_file.empty()) fail("--output goes with --batch-file");
  const bool interactive = sources == 0;
  if (interactive && !isatty(fileno(stdin)))
    fail("give --prompt TEXT, --prompt-file FILE (- for standard input) or --batch-file FILE "
         "(the interactive mode needs a terminal on standard input)");

  const LoadedModel loaded =
      load_model(a.checkpoint, a.weights, a.config, *a.on);
  const BpeTokenizer tokenizer = load_tokenizer(a.tokenizer, loaded);
  const ModelConfig& c = loaded.model->config();
  GenerationOptions options = a.generation;
  options.stop_at_eos = !a.ignore_eos;
  options.truncate_left = a.truncate == "left";
  options.sampling.allowed_ids = tokenizer.vocab_size();  // ids past it are no tokens
  Generator generator(*loaded.model, &tokenizer, options);
  Session session{a, c, tokenizer, generator};
  if (!a.batch_file.empty()) {
    session.batch();
  } else if (a.prompt_given) {
    session.stream(a.prompt);
  } else if (!a.prompt_file.empty()) {
    std::string text;
    if (a.prompt_file == "-") {
      text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    } else {
      text = read_file(a.prompt_file, "the --prompt-file");
    }
    session.stream(text);
  } else {
    session.interactive();
  }
}

}  // namespace

void register_generate(CLI::App& app) {
  static GenerateArgs a;
  auto* cmd = app.add_subcommand(
      "generate",
      "generate text with the SPS KV cache, persistent stream + window ring (docs/model.md "
      "§7; streams to stdout; JSONL batches; "
      "interactive on a terminal)");
  cmd->add_option("--checkpoint", a.checkpoint,
                  "checkpoint folder (model.safetensors + config.yaml), or a run folder: its "
                  "newest checkpoint");
  cmd->add_option("--weights", a.weights, "weights (.safetensors), with --config");
  cmd->add_option("--config", a.config, "model config YAML (a model: section), with --weights");
  cmd->add_option("--prompt", a.prompt, "the prompt text (\"\" starts a new document)");
  cmd->add_option("--prompt-file", a.prompt_file, "read the prompt from a file (- for stdin)");
  cmd->add_option("--batch-file", a.batch_file,
                  "JSON Lines of {\"prompt\": TEXT, \"id\": any}: write one JSON line per prompt "
                  "(index, prompt, completion, prompt_tokens, completion_tokens, completion_ids, "
                  "stop_reason, truncated, id)");
  cmd->add_option("--output", a.output, "where --batch-file results go (default: stdout)");
  cmd->add_option("--batch-size", a.batch_size, "prompts generated together in batch mode")
      ->check(CLI::Range(int64_t(1), int64_t(4096)));
  cmd->add_option("--tokenizer", a.tokenizer,
                  "gpt2, a folder with encoder.json + vocab.bpe, or a rank file (default: the "
                  "one the config records)");
  cmd->add_option("--max-new-tokens", a.generation.max_new_tokens, "tokens to generate at most")
      ->check(CLI::Range(int64_t(0), int64_t(1) << 30));
  cmd->add_option("--temperature", a.generation.sampling.temperature, "0 = greedy (default)");
  cmd->add_option("--top-k", a.generation.sampling.top_k, "keep the k most likely ids (0 = all)");
  cmd->add_option("--top-p", a.generation.sampling.top_p, "nucleus mass in (0, 1] (1 = all)");
  cmd->add_option("--seed", a.generation.sampling.seed, "seed of the sampling streams");
  cmd->add_option("--stop", a.generation.stop_strings, "stop before this text (repeatable)");
  cmd->add_option("--forbid", a.generation.sampling.forbidden, "an id never to emit (repeatable)");
  cmd->add_flag("--ignore-eos", a.ignore_eos,
                "go on after EOS (it starts a new document) until --max-new-tokens or a stop");
  cmd->add_option("--truncate", a.truncate,
                  "none: a prompt longer than the context is an error; left: keep its last "
                  "block_size tokens");
  cmd->add_option("--prefill-rows", a.generation.prefill_rows,
                  "rows per prefill forward (0 = as many as fit 1024 token slots; fewer uses less "
                  "memory)")
      ->check(CLI::Range(int64_t(0), int64_t(4096)));
  cmd->add_option("--threads", a.threads, "OpenMP threads (default: OMP_NUM_THREADS or all cores)")
      ->check(CLI::Range(0, 4096));
  cmd->add_flag("--stats", a.stats, "print token counts, prefill time, decode rate, cache size");
  a.on = &add_device_and_weight_type_options(cmd, "sps generate");
  cmd->callback([cmd] {
    a.prompt_given = cmd->count("--prompt") > 0;
    run_generate(a);
  });
}

}  // namespace sps::cli
