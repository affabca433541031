// Exact equality with an independent GPT-2 tokenizer (js-tiktoken, run by Node through
// tests/tokenizer/reference_tokenize.mjs) on adversarial strings, random strings, invalid
// UTF-8 and a real text sample; and decode(encode(x)) == x on valid UTF-8.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/base64.h"
#include "tokenizer/bpe.h"
#include "tokenizer/utf8.h"
#include "util/sps_home.h"
#include "tokenizer_fixtures.h"

namespace sps {
namespace {

using Ids = std::vector<uint32_t>;

std::string escaped(std::string_view s) {
  std::string out;
  for (unsigned char c : s.substr(0, 120)) {
    if (c >= 0x20 && c < 0x7F && c != '\\') out += static_cast<char>(c);
    else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (s.size() > 120) out += "...(" + std::to_string(s.size()) + " bytes)";
  return out;
}

struct RefResult {
  Ids ids;
  size_t replacements = 0;
};

// Runs the Node reference on the texts; an empty optional-like flag on failure.
bool run_reference(const std::vector<std::string>& texts, std::vector<RefResult>& out,
                   std::string& error) {
  const std::string source = SPS_SOURCE_DIR;
  std::string log;
  if (testing::run_command("bash '" + source + "/scripts/get-reference-tokenizer.sh' 2>&1", &log) != 0) {
    error = "scripts/get-reference-tokenizer.sh failed: " + log;
    return false;
  }
  testing::TempDir dir;
  std::string input;
  for (const auto& t : texts) {
    if (find_invalid_utf8(t) == std::string::npos) input += nlohmann::json(t).dump() + "\n";
    else input += nlohmann::json{{"base64", base64_encode(t)}}.dump() + "\n";
  }
  testing::write_whole_file(dir / "in.jsonl", input);
  const std::string modules = sps_home() + "/node/node_modules";
  std::string text;
  const int rc = testing::run_command("node '" + source + "/tests/tokenizer/reference_tokenize.mjs' '" +
                                        modules + "' < '" + (dir / "in.jsonl") + "' 2>&1",
                                    &text);
  if (rc != 0) {
    error = "the Node reference failed: " + text.substr(0, 2000);
    return false;
  }
  std::istringstream lines(text);
  std::string line;
  out.clear();
  while (std::getline(lines, line)) {
    const size_t bar = line.rfind(" | ");
    if (bar == std::string::npos) {
      error = "unexpected reference output: " + line.substr(0, 200);
      return false;
    }
    RefResult r;
    std::istringstream ids(line.substr(0, bar));
    uint32_t id;
    while (ids >> id) r.ids.push_back(id);
    r.replacements = std::stoul(line.substr(bar + 3));
    out.push_back(std::move(r));
  }
  if (out.size() != texts.size()) {
    error = "the reference answered " + std::to_string(out.size()) + " lines for " +
            std::to_string(texts.size()) + " texts";
    return false;
  }
  return true;
}

size_t count_fffd(std::string_view s) {
  size_t n = 0;
  for (size_t p = s.find("\xEF\xBF\xBD"); p != std::string_view::npos; p = s.find("\xEF\xBF\xBD", p + 3)) ++n;
  return n;
}

// Compares sps with the reference on every text: ids, replacement counts, round trip.
void compare_with_reference(const BpeTokenizer& gpt2, const std::vector<std::string>& texts) {
  std::vector<RefResult> reference;
  std::string error;
  ASSERT_TRUE(run_reference(texts, reference, error)) << error;
  size_t mismatches = 0;
  for (size_t i = 0; i < texts.size() && mismatches < 10; ++i) {
    EncodeStats stats;
    const Ids ids = gpt2.encode(texts[i], &stats);
    const bool valid = find_invalid_utf8(texts[i]) == std::string::npos;
    const size_t expected_replacements = valid ? 0 : reference[i].replacements - count_fffd(texts[i]);
    bool ok = ids == reference[i].ids && stats.replacements == expected_replacements;
    if (valid) ok = ok && gpt2.decode(ids) == texts[i];
    if (!ok) {
      ++mismatches;
      size_t first = 0;
      while (first < ids.size() && first < reference[i].ids.size() && ids[first] == reference[i].ids[first]) ++first;
      ADD_FAILURE() << "text #" << i << " \"" << escaped(texts[i]) << "\": sps gives " << ids.size()
                    << " ids, the reference " << reference[i].ids.size() << "; first difference at "
                    << first << "; replacements " << stats.replacements << " vs "
                    << expected_replacements << "; round trip "
                    << (valid ? (gpt2.decode(ids) == texts[i] ? "ok" : "BROKEN") : "n/a");
    }
  }
}

std::string repeat(std::string_view s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

std::vector<std::string> adversarial_strings() {
  std::vector<std::string> t = {
      "", "a", " ", "Hello, world!", "hello world", "  leading", "trailing   ", "trailing \t\n",
      // Contractions, upper case and Unicode apostrophes.
      "it's", "IT'S", "It'S", "don't", "DON'T", "we're", "they've", "I'm", "you'll", "he'd",
      "'s", "''s", "'ss", " 's", "x's's", "rock'n'roll", "o'clock", "'re've'm'll'd't",
      "it\xE2\x80\x99s", "it\xE2\x80\x98s", "it\xCA\xBCs", "\xE2\x80\x99s", "'", "' ", " '",
      "He said 'hello' and 'S'", "'S'T'RE'VE'M'LL'D",
      // Digits.
      "0", "123", "1234567890", repeat("1234567890", 20), "3.14159", "1,000,000", "-42",
      "2024-01-01T12:00:00Z", "0x1F", "1e-10", "\xD9\xA3\xD9\xA4\xD9\xA5",
      "\xC2\xB2\xC2\xB3", "\xE2\x85\xAB", "\xC2\xBD", "abc123def", " 123 456 ", "A1B2C3",
      "\xF0\x9D\x9F\x98\xF0\x9D\x9F\x99",
      // Letters beyond ASCII, combining marks, scripts.
      "na\xC3\xAFve caf\xC3\xA9", "\xC3\x86r\xC3\xB8sk\xC3\xB8" "bing", "Stra\xC3\x9F" "e",
      "\xC4\xB0stanbul", "\xEF\xAC\x81" "ligature", "\xCE\x9A\xCE\xB1\xCE\xBB\xCE\xB7\xCE\xBC\xCE\xAD\xCF\x81\xCE\xB1",
      "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82 \xD0\xBC\xD0\xB8\xD1\x80",
      "\xD7\xA9\xD7\x9C\xD7\x95\xD7\x9D",
      "\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7 \xD8\xA8\xD8\xA7\xD9\x84\xD8\xB9\xD8\xA7\xD9\x84\xD9\x85",
      "\xD8\xA7\xD9\x84\xD8\xB3\xD9\x91\xD9\x8E\xD9\x84\xD8\xA7\xD9\x85\xD9\x8F",
      "\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87",
      "\xE0\xB8\xAA\xE0\xB8\xA7\xE0\xB8\xB1\xE0\xB8\xAA\xE0\xB8\x94\xE0\xB8\xB5",
      "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C",
      "\xE3\x81\x93\xE3\x82\x93\xE3\x81\xAB\xE3\x81\xA1\xE3\x81\xAF\xE4\xB8\x96\xE7\x95\x8C",
      "\xEC\x95\x88\xEB\x85\x95\xED\x95\x98\xEC\x84\xB8\xEC\x9A\x94",
      "e\xCC\x81", "a\xCC\x80\xCC\x81\xCC\x82", "\xCC\x81", " \xCC\x81x",
      "Z\xCD\x91\xCD\x97\xCD\x8E\xCC\xB1" "a\xCC\xBE\xCD\xA8l\xCD\x97g\xCC\x92o",
      "\xF0\x9D\x94\x98\xF0\x9D\x94\xAB\xF0\x9D\x94\xA6",
      // Emoji: plain, ZWJ families, flags, skin tones, keycaps, variation selectors.
      "\xF0\x9F\x91\x8D", "\xF0\x9F\x98\x80\xF0\x9F\x98\x81\xF0\x9F\x98\x82",
      "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7\xE2\x80\x8D\xF0\x9F\x91\xA6",
      "\xF0\x9F\x8F\xB3\xEF\xB8\x8F\xE2\x80\x8D\xF0\x9F\x8C\x88", "\xF0\x9F\x87\xBA\xF0\x9F\x87\xB8",
      "\xF0\x9F\x91\x8B\xF0\x9F\x8F\xBD", "1\xEF\xB8\x8F\xE2\x83\xA3", "\xE2\x9D\xA4\xEF\xB8\x8F",
      "I \xE2\x9D\xA4\xEF\xB8\x8F NY \xF0\x9F\x97\xBD!", " \xF0\x9F\x98\x80 \xF0\x9F\x98\x80  \xF0\x9F\x98\x80",
      // Special-token text is ordinary text.
      "<|endoftext|>", "a<|endoftext|>b", "<|endoftext|><|endoftext|>", " <|endoftext|> ",
      "<|predict|>", "<|endoftext", "endoftext|>",
      // Control characters, NUL, odd white space.
      std::string("\0", 1), std::string("a\0b", 3), std::string("\0\0 \0", 4), "\x01\x02\x1F\x7F",
      "\x1C\x1D\x1E\x1F", "a\x0B" "b\x0C" "c", "\r", "\r\n", "a\r\nb\r\n\r\nc", "\xC2\x85",
      "x\xC2\x85y", "!\xC2\x85!", "\xC2\xA0x", "a\xC2\xA0\xC2\xA0" "b", "a\xE3\x80\x80" "b",
      "\xE2\x80\xA8\xE2\x80\xA9", "\xE1\x9A\x80", "\xE2\x80\x8B", "!\xEF\xBB\xBF", "\xEF\xBB\xBF" "BOM",
      "\xE1\xA0\x8E", "a\xE1\xA0\x8E" "b", "!\xE1\xA0\x8E!", ".\xE1\xA0\x8E \xE1\xA0\x8E.",
      "!\xEF\xBB\xBF!", "x \xC2\x85 y", "\x1C!\x1C \x1C", "\xE2\x80\xAF\xE2\x81\x9F",
      // Code, URLs, markup.
      "def f(x):\n    return x ** 2\n", "#include <stdio.h>\nint main() { return 0; }\n",
      "https://example.com/a?b=c&d=e#f", "user@example.com", "{\"key\": [1, 2.5, null]}",
      "<div class=\"x\">text</div>", "   \t\tindented\n\t\t  code", "$$\\sum_{i=1}^n x_i$$",
      "....!!!???", "---===---", "***bold***", "C++20", "a_b_c", "@@@ ### $$$",
      // Very long pieces.
      // (Sizes stay moderate: the reference merges in quadratic time.)
      repeat("a", 1200), repeat("ab", 600), repeat("supercalifragilisticexpialidocious", 40),
      repeat("\xF0\x9F\x98\x80", 300), repeat("\xC3\xA9", 600), repeat("1", 1000), repeat("!", 800),
      repeat(" ", 3000), repeat("\n", 1000), repeat("x ", 1000), repeat(" \n", 500),
      repeat("\xE4\xB8\x80", 400), repeat("\xE0\xA4\xA8\xE0\xA5\x8D", 200), repeat("'s", 500),
  };
  // White space in every combination: all strings of length 1..4 over this alphabet.
  const std::vector<std::string> alphabet = {" ", "\t", "\n", "\r", "a", "1", ".", "\xE3\x80\x80"};
  std::vector<std::string> level = {""};
  for (int len = 1; len <= 4; ++len) {
    std::vector<std::string> next;
    for (const auto& prefix : level)
      for (const auto& c : alphabet) next.push_back(prefix + c);
    t.insert(t.end(), next.begin(), next.end());
    level = std::move(next);
  }
  // Random strings over a mixed alphabet (fixed seed).
  const std::vector<std::string> pool = {
      "a", "Z", "q", "e", "9", "0", " ", " ", "  ", "\t", "\n", "\r\n", "'", "'s", "'S", "'ll",
      "\xE2\x80\x99", ".", ",", "!", "-", "_", "<|endoftext|>", "\xC3\xA9", "\xC3\x9F",
      "\xE4\xB8\xAD", "\xF0\x9F\x98\x80", "\xE2\x80\x8D", "\xCC\x81", "\xC2\xA0", "\xE3\x80\x80",
      "\xC2\x85", "\xE2\x80\xA8", std::string("\0", 1), "\x1F", "\xD9\xA3", "\xEF\xBB\xBF",
      "the", " the", "ing", "tion", "123", "\xD0\xB4\xD0\xB0"};
  std::mt19937 rng(20240601);
  for (int w = 0; w < 3; ++w) {  // very long words of random letters
    std::string word;
    for (int k = 0; k < 1000; ++k) word += static_cast<char>((w == 1 ? 'A' : 'a') + rng() % 26);
    t.push_back(w == 2 ? " " + word : word);
  }
  for (int i = 0; i < 1500; ++i) {
    std::string s;
    const int n = static_cast<int>(rng() % 24);
    for (int k = 0; k < n; ++k) s += pool[rng() % pool.size()];
    t.push_back(s);
  }
  return t;
}

std::vector<std::string> invalid_utf8_strings() {
  std::vector<std::string> t = {
      "\xFF", "\x80", "a\x80" "b", "\xC3", "\xC3" "A", "\xC0\xAF", "\xE2\x82", "\xE2\x82" "x",
      "\xE0\x80\x80", "\xED\xA0\x80", "\xF0\x80\x80\x80", "\xF0\x9F\x98", "\xF0\x9F\x98" "A",
      "\xF4\x90\x80\x80", "\xF5\x80", "\xFE\xFF", "ok \xFF\xFE and \xE2\x82", "caf\xE9 latin-1 text",
      "\xF0\x9F\xF0\x9F\x98\x80", repeat("\xE2\x82", 300), "\xEF\xBF\xBD and \xFF",
  };
  std::mt19937 rng(99);
  for (int i = 0; i < 300; ++i) {
    std::string s;
    const int n = static_cast<int>(rng() % 16);
    for (int k = 0; k < n; ++k) {
      const uint32_t r = rng() % 4;
      s += r == 0 ? static_cast<char>(0x80 + rng() % 128) : r == 1 ? 'x' : r == 2 ? ' ' : '\xE2';
    }
    t.push_back(s);
  }
  return t;
}

// Text files under /usr/share/doc (*.rst, *.txt), a few MB, one text per file.
std::vector<std::string> corpus_sample(size_t max_bytes) {
  namespace fs = std::filesystem;
  std::vector<std::string> paths;
  std::error_code ec;
  const fs::path root = "/usr/share/doc";
  if (!fs::is_directory(root, ec)) return {};
  for (auto it = fs::recursive_directory_iterator(root, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const auto ext = it->path().extension();
    if ((ext == ".rst" || ext == ".txt") && it->is_regular_file(ec)) paths.push_back(it->path().string());
  }
  std::sort(paths.begin(), paths.end());
  std::vector<std::string> texts;
  size_t total = 0;
  for (const auto& p : paths) {
    std::string text = testing::read_whole_file(p);
    if (text.empty() || total + text.size() > max_bytes) continue;
    total += text.size();
    texts.push_back(std::move(text));
  }
  return texts;
}

// Every file of the local `edu` corpus (scripts/get-corpora.sh), in path order.
std::vector<std::string> edu_corpus() {
  namespace fs = std::filesystem;
  const fs::path root = sps_home() + "/corpora/edu";
  std::vector<std::string> paths, texts;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return {};
  for (auto it = fs::recursive_directory_iterator(root, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (it->is_regular_file(ec)) paths.push_back(it->path().string());
  std::sort(paths.begin(), paths.end());
  for (const auto& p : paths) texts.push_back(testing::read_whole_file(p));
  return texts;
}

class Gpt2Reference : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::has_command("node"))
      GTEST_SKIP() << "node is absent: cannot run the reference GPT-2 tokenizer (js-tiktoken)";
  }
};

TEST_F(Gpt2Reference, AdversarialStrings) {
  SPS_GPT2_OR_SKIP(gpt2);
  compare_with_reference(gpt2, adversarial_strings());
}

TEST_F(Gpt2Reference, InvalidUtf8) {
  SPS_GPT2_OR_SKIP(gpt2);
  compare_with_reference(gpt2, invalid_utf8_strings());
}

TEST_F(Gpt2Reference, RealTextSample) {
  SPS_GPT2_OR_SKIP(gpt2);
  const std::vector<std::string> texts = corpus_sample(3 << 20);
  if (texts.empty()) GTEST_SKIP() << "no *.rst or *.txt files under /usr/share/doc";
  compare_with_reference(gpt2, texts);
}

// The whole in-domain corpus the demo and the experiments train on (32 MB).
TEST_F(Gpt2Reference, EduCorpusSlow) {
  SPS_GPT2_OR_SKIP(gpt2);
  const std::vector<std::string> texts = edu_corpus();
  if (texts.empty()) GTEST_SKIP() << "no edu corpus under " << sps_home() << "/corpora (scripts/get-corpora.sh)";
  compare_with_reference(gpt2, texts);
}

}  // namespace
}  // namespace sps
