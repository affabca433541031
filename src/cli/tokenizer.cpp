// sps tokenizer encode|decode: inspect a tokenizer from the shell.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <thread>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "tokenizer/bpe.h"
#include "tokenizer/bpe_trainer.h"
#include "util/error.h"
#include "util/progress.h"
#include "util/writer_lock.h"

namespace sps::cli {

namespace {

std::string read_stdin() {
  std::string text;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, stdin)) > 0) text.append(buffer, n);
  if (std::ferror(stdin)) fail("cannot read standard input");
  return text;
}

void write_stdout(const std::string& bytes) {
  if (std::fwrite(bytes.data(), 1, bytes.size(), stdout) != bytes.size() || std::fflush(stdout) != 0)
    fail("cannot write standard output");
}

void run_encode(const std::string& spec, bool print_stats) {
  const BpeTokenizer tokenizer = BpeTokenizer::load(spec);
  const std::string text = read_stdin();
  EncodeStats stats;
  const auto start = std::chrono::steady_clock::now();
  const std::vector<uint32_t> ids = tokenizer.encode(text, &stats);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::memory_buffer out;
  for (size_t i = 0; i < ids.size(); ++i) fmt::format_to(std::back_inserter(out), "{}{}", i ? " " : "", ids[i]);
  out.push_back('\n');
  write_stdout(fmt::to_string(out));
  if (stats.replacements)
    std::fprintf(stderr, "sps: replaced %zu ill-formed UTF-8 sequence(s) with U+FFFD\n",
                 stats.replacements);
  if (print_stats)
    std::fprintf(stderr, "sps: %zu bytes -> %zu tokens (%.3f bytes/token) in %.3f s, %.1f MB/s\n",
                 stats.bytes, stats.tokens, stats.tokens ? double(stats.bytes) / stats.tokens : 0.0,
                 seconds, seconds > 0 ? stats.bytes / seconds / 1e6 : 0.0);
}

void run_decode(const std::string& spec) {
  const BpeTokenizer tokenizer = BpeTokenizer::load(spec);
  const std::string text = read_stdin();
  std::vector<uint32_t> ids;
  size_t pos = 0;
  while (true) {
    pos = text.find_first_not_of(" \t\r\n,", pos);
    if (pos == std::string::npos) break;
    size_t end = text.find_first_of(" \t\r\n,", pos);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(pos, end - pos);
    uint64_t id = 0;
    bool ok = word.size() <= 10;
    for (char c : word) {
      if (c < '0' || c > '9') ok = false;
      id = id * 10 + static_cast<uint64_t>(c - '0');
    }
    if (!ok || id > UINT32_MAX || !tokenizer.is_token(static_cast<uint32_t>(id)))
      fail("decode: '{}' is not a token id of {} (ids are 0..{})", word.substr(0, 40),
           tokenizer.name(), tokenizer.padded_vocab_size() - 1);
    ids.push_back(static_cast<uint32_t>(id));
    pos = end;
  }
  write_stdout(tokenizer.decode(ids));
}

struct TrainArgs {
  std::vector<std::string> inputs, include;
  uint32_t vocab_size = 8192;
  std::string out;
  int threads = 0;
  bool overwrite = false;
};

void run_train(const TrainArgs& args) {
  const WriterLock lock(file_lock_path(args.out), args.out);
  if (std::filesystem::exists(args.out) && !args.overwrite)
    fail("{}: already exists (pass --overwrite to replace it)", args.out);
  const std::vector<std::string> files = collect_text_files(args.inputs, args.include);
  if (files.empty()) fail("no input files (check the paths and --include)");
  const int threads = args.threads > 0 ? args.threads
                                       : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  // Counting pieces by input bytes (the files' sizes on disk), then merging by merges.
  int64_t input_bytes = 0;
  for (const std::string& file : files) {
    std::error_code ec;
    const uintmax_t size = std::filesystem::file_size(file, ec);
    if (!ec) input_bytes += int64_t(size);
  }
  ProgressReporter counting_progress("counting pieces", progress_in_bytes());
  std::optional<ProgressReporter> merging_progress;  // from the last file counted on
  auto counting = [&](size_t done, size_t total, size_t bytes) {
    counting_progress.update(int64_t(bytes), input_bytes, fmt::format("{}/{} files", done, total));
    if (done == total) {
      counting_progress.finish();
      merging_progress.emplace("merging", progress_in("merges"));
    }
  };
  auto merging = [&](int64_t done, int64_t total) {
    if (merging_progress) merging_progress->update(done, total);
  };
  TrainReport report;
  std::vector<std::string> tokens =
      train_bpe_on_files(files, args.vocab_size, threads, &report, counting, merging);
  counting_progress.finish();
  merging_progress.reset();
  const BpeTokenizer tokenizer = BpeTokenizer::from_ranks(std::move(tokens), args.out);
  tokenizer.save_rank_file(args.out);
  std::fprintf(stderr,
               "sps: trained %u tokens (EOS %u, PREDICT %u, PAD %u, V %u) on %zu files, %.1f MB, "
               "%zu distinct pieces, %zu U+FFFD replacements, in %.1f s -> %s\n",
               tokenizer.vocab_size(), tokenizer.eos_id(), tokenizer.predict_id(), tokenizer.pad_id(),
               tokenizer.padded_vocab_size(), report.files, report.stats.bytes / 1e6,
               report.distinct_pieces, report.stats.replacements, elapsed(), args.out.c_str());
}

}  // namespace

void register_tokenizer(CLI::App& app) {
  auto* tokenizer = app.add_subcommand("tokenizer", "encode, decode and train tokenizers");
  tokenizer->require_subcommand(1);

  static std::string spec = "gpt2";
  const char* spec_help =
      "gpt2 (GPT-2's files from `make deps`), a folder with encoder.json + vocab.bpe, or a "
      "tiktoken rank file (what `sps tokenizer train` writes)";

  auto* encode = tokenizer->add_subcommand(
      "encode", "read text on stdin, print its token ids (space-separated) on stdout");
  static bool print_stats = false;
  encode->add_option("--tokenizer", spec, spec_help)->capture_default_str();
  encode->add_flag("--stats", print_stats, "print bytes, tokens and encoding speed on stderr");
  encode->callback([] { run_encode(spec, print_stats); });

  auto* decode = tokenizer->add_subcommand(
      "decode", "read token ids (whitespace-separated) on stdin, print their text on stdout");
  decode->add_option("--tokenizer", spec, spec_help)->capture_default_str();
  decode->callback([] { run_decode(spec); });

  static TrainArgs train_args;
  auto* train = tokenizer->add_subcommand(
      "train",
      "train a byte-level BPE (GPT-2's pre-tokenizer) on text files; writes a tiktoken rank "
      "file (`base64(bytes) rank` per line; ranks 0-255 are the bytes, then one per merge; the "
      "end-of-text id is vocab-size - 1) that --tokenizer PATH loads");
  train->add_option("inputs", train_args.inputs, "text files and folders (one document per file)")
      ->required();
  train->add_option("--out", train_args.out, "the rank file to write")->required();
  train->add_option("--vocab-size", train_args.vocab_size,
                    "tokens including end-of-text (PREDICT and PAD come on top)")
      ->capture_default_str()
      ->check(CLI::Range(258u, 1u << 24));
  train->add_option("--include", train_args.include,
                    "in folders, keep only files whose name matches one of these globs (*.rst)");
  train->add_option("--threads", train_args.threads, "threads for counting (default: all cores)");
  train->add_flag("--overwrite", train_args.overwrite, "replace an existing --out file");
  train->callback([] { run_train(train_args); });
}

}  // namespace sps::cli
