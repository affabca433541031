// sps tokenizer encode|decode: inspect a tokenizer from the shell.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "tokenizer/bpe.h"
#include "util/error.h"

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
}

}  // namespace sps::cli
