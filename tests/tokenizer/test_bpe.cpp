// BpeTokenizer with GPT-2's files: known ids, special ids, round trips, thread safety, the
// word cache, the rank-file format, and clear errors for bad files.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tokenizer/bpe.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer_fixtures.h"
#include "util/error.h"
#include "util/sps_home.h"

namespace sps {
namespace {

using testing::TempDir;
using testing::read_whole_file;
using testing::write_whole_file;
using Ids = std::vector<uint32_t>;

std::vector<std::string> split(std::string_view text) {
  static PreTokenizer pre;
  PreTokenizer::Matcher matcher(pre);
  std::vector<std::string> pieces;
  matcher.split(text, [&](std::string_view p) { pieces.emplace_back(p); });
  return pieces;
}

using Pieces = std::vector<std::string>;

TEST(PreTokenizer, SplitsLikeGpt2) {
  EXPECT_EQ(split("Hello, world!"), (Pieces{"Hello", ",", " world", "!"}));
  EXPECT_EQ(split("it's IT'S"), (Pieces{"it", "'s", " IT", "'", "S"}));
  EXPECT_EQ(split("a  b"), (Pieces{"a", " ", " b"}));
  EXPECT_EQ(split("a \n\n b"), (Pieces{"a", " \n\n", " b"}));
  EXPECT_EQ(split("x   "), (Pieces{"x", "   "}));
  EXPECT_EQ(split("12345 678"), (Pieces{"12345", " 678"}));
  EXPECT_EQ(split("a\xE3\x80\x80\xE3\x80\x80" "b"),  // two U+3000
            (Pieces{"a", "\xE3\x80\x80", "\xE3\x80\x80", "b"}));
  EXPECT_EQ(split("e\xCC\x81t\xC3\xA9"), (Pieces{"e", "\xCC\x81", "t\xC3\xA9"}));  // e + U+0301
  EXPECT_EQ(split(std::string("a\0b", 3)), (Pieces{"a", std::string("\0", 1), "b"}));
}

TEST(PreTokenizer, WhitespaceIsUnicodeWhiteSpace) {
  // U+0085 is White_Space (tiktoken's \s): it ends a punctuation run.
  EXPECT_EQ(split("!\xC2\x85"), (Pieces{"!", "\xC2\x85"}));
  // U+FEFF, U+180E, U+200B and U+001C are not White_Space: they join the run.
  EXPECT_EQ(split("!\xEF\xBB\xBF"), (Pieces{"!\xEF\xBB\xBF"}));
  EXPECT_EQ(split("!\xE1\xA0\x8E"), (Pieces{"!\xE1\xA0\x8E"}));
  EXPECT_EQ(split("!\xE2\x80\x8B"), (Pieces{"!\xE2\x80\x8B"}));
  EXPECT_EQ(split("!\x1C"), (Pieces{"!\x1C"}));
  EXPECT_EQ(split("!\xC2\xA0"), (Pieces{"!", "\xC2\xA0"}));  // U+00A0 is White_Space
}

TEST(PreTokenizer, HugeRunsDoNotExhaustTheMatcher) {
  const std::string spaces(1 << 20, ' ');
  EXPECT_EQ(split(spaces + "x"), (Pieces{std::string((1 << 20) - 1, ' '), " x"}));
  const std::string letters(1 << 20, 'q');
  EXPECT_EQ(split(letters).size(), 1u);
}

TEST(Gpt2Tokenizer, KnownIdsAndSpecialIds) {
  SPS_GPT2_OR_SKIP(gpt2);
  EXPECT_EQ(gpt2.encode("hello world"), (Ids{31373, 995}));
  EXPECT_EQ(gpt2.encode("Hello, world!"), (Ids{15496, 11, 995, 0}));
  // encode_ordinary: the special token's text is ordinary text.
  EXPECT_EQ(gpt2.encode("<|endoftext|>"), (Ids{27, 91, 437, 1659, 5239, 91, 29}));
  EXPECT_EQ(gpt2.encode(""), Ids{});
  EXPECT_EQ(gpt2.vocab_size(), 50257u);
  EXPECT_EQ(gpt2.eos_id(), 50256u);
  EXPECT_EQ(gpt2.predict_id(), 50257u);
  EXPECT_EQ(gpt2.pad_id(), 50303u);
  EXPECT_EQ(gpt2.padded_vocab_size(), 50304u);
  EXPECT_EQ(gpt2.name(), "gpt2");
  const Ids specials{50256, 50257, 50303};
  EXPECT_EQ(gpt2.decode(specials), "<|endoftext|><|predict|><|pad|>");
  EXPECT_FALSE(gpt2.is_token(50258));
  EXPECT_THROW(gpt2.decode(Ids{50258}), UserError);
  EXPECT_THROW(gpt2.decode(Ids{50304}), UserError);
}

TEST(Gpt2Tokenizer, InvalidUtf8IsReplacedAndCounted) {
  SPS_GPT2_OR_SKIP(gpt2);
  EncodeStats stats;
  const Ids ids = gpt2.encode("ok \xFF\xFE and \xE2\x82", &stats);
  EXPECT_EQ(stats.replacements, 3u);
  EXPECT_EQ(stats.bytes, 12u);
  EXPECT_EQ(stats.tokens, ids.size());
  EXPECT_EQ(ids, gpt2.encode("ok \xEF\xBF\xBD\xEF\xBF\xBD and \xEF\xBF\xBD"));
  EXPECT_EQ(gpt2.decode(ids), "ok \xEF\xBF\xBD\xEF\xBF\xBD and \xEF\xBF\xBD");
}

TEST(Gpt2Tokenizer, EncodeAppendsAndAccumulatesStats) {
  SPS_GPT2_OR_SKIP(gpt2);
  Ids out{7};
  EncodeStats stats;
  gpt2.encode("hello", out, &stats);
  gpt2.encode(" world", out, &stats);
  EXPECT_EQ(out, (Ids{7, 31373, 995}));
  EXPECT_EQ(stats.tokens, 2u);
  EXPECT_EQ(stats.bytes, 11u);
}

TEST(Gpt2Tokenizer, WordCacheStaysCorrectWhenItOverflows) {
  SPS_GPT2_OR_SKIP(gpt2);
  std::mt19937 rng(7);
  std::string text;
  Ids expected;
  for (int w = 0; w < 60000; ++w) {  // more distinct words than the cache holds
    std::string word = " ";
    const int len = 6 + static_cast<int>(rng() % 8);
    for (int k = 0; k < len; ++k) word.push_back(static_cast<char>('a' + rng() % 26));
    const Ids ids = gpt2.encode(word);
    expected.insert(expected.end(), ids.begin(), ids.end());
    text += word;
  }
  EXPECT_EQ(gpt2.encode(text), expected);
  EXPECT_EQ(gpt2.encode(text), expected);
}

TEST(Gpt2Tokenizer, LongPiecesMergeLikeShortOnes) {
  SPS_GPT2_OR_SKIP(gpt2);
  // A long piece (heap merging) must equal the same word split where merges cannot cross:
  // a long run of one repeated token-sized unit merges unit by unit.
  std::string word;
  for (int k = 0; k < 400; ++k) word += "abc";
  const Ids ids = gpt2.encode(word);
  EXPECT_EQ(gpt2.decode(ids), word);
  std::string digits(5000, '7');
  EXPECT_EQ(gpt2.decode(gpt2.encode(digits)), digits);
}

TEST(Gpt2Tokenizer, ThreadsShareOneTokenizer) {
  SPS_GPT2_OR_SKIP(gpt2);
  std::vector<std::string> texts;
  for (int t = 0; t < 4; ++t) {
    std::string s;
    for (int k = 0; k < 3000; ++k) s += "word" + std::to_string(k * (t + 1)) + " caf\xC3\xA9 \xF0\x9F\x98\x80 ";
    texts.push_back(s);
  }
  std::vector<Ids> expected;
  for (const auto& s : texts) expected.push_back(gpt2.encode(s));
  std::vector<int> ok(texts.size(), 0);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < texts.size(); ++t)
    threads.emplace_back([&, t] {
      bool same = true;
      for (int r = 0; r < 5; ++r) same = same && gpt2.encode(texts[t]) == expected[t];
      ok[t] = same;
    });
  for (auto& th : threads) th.join();
  for (size_t t = 0; t < texts.size(); ++t) EXPECT_TRUE(ok[t]) << "thread " << t;
}

TEST(Gpt2Tokenizer, RankFileRoundTrip) {
  SPS_GPT2_OR_SKIP(gpt2);
  TempDir dir;
  const std::string path = dir / "gpt2.tiktoken";
  gpt2.save_rank_file(path);
  const std::string text = read_whole_file(path);
  EXPECT_EQ(text.substr(0, 7), "IQ== 0\n");  // "!" has rank 0
  const BpeTokenizer again = BpeTokenizer::load(path);
  EXPECT_EQ(again.eos_id(), 50256u);
  EXPECT_EQ(again.pad_id(), 50303u);
  EXPECT_EQ(again.padded_vocab_size(), 50304u);
  const std::string sample =
      "The quick brown fox \xE2\x80\x94 it's 2024! \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x91\x8D\n\n  x";
  EXPECT_EQ(again.encode(sample), gpt2.encode(sample));
  EXPECT_EQ(again.decode(gpt2.encode(sample)), sample);
}

// ---- Bad files ------------------------------------------------------------------------

// Runs f, expects a UserError whose single-line message contains every needle.
template <typename F>
void expect_user_error(F&& f, std::initializer_list<std::string> needles) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const UserError& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    for (const auto& needle : needles) EXPECT_NE(message.find(needle), std::string::npos) << message;
  }
}

TEST(TokenizerFiles, MissingFilesNameThePath) {
  TempDir dir;
  expect_user_error([&] { BpeTokenizer::load(dir / "nope.tiktoken"); }, {"nope.tiktoken"});
  expect_user_error([&] { BpeTokenizer::load(dir.path()); }, {dir.path(), "encoder.json"});
  expect_user_error([&] { BpeTokenizer::from_gpt2_files(dir / "e.json", dir / "v.bpe"); },
                    {"e.json", "cannot open GPT-2's encoder.json: "});
}

TEST(TokenizerFiles, Gpt2MissingTellsToRunMakeDeps) {
  TempDir dir;
  const char* old = std::getenv("SPS_HOME");
  const std::string saved = old ? old : "";
  ::setenv("SPS_HOME", dir.path().c_str(), 1);
  expect_user_error([&] { BpeTokenizer::load("gpt2"); }, {"make deps", dir.path()});
  if (old) ::setenv("SPS_HOME", saved.c_str(), 1);
  else ::unsetenv("SPS_HOME");
}

TEST(TokenizerFiles, MalformedEncoderJson) {
  TempDir dir;
  write_whole_file(dir / "vocab.bpe", "#version: 0.2\n");
  write_whole_file(dir / "encoder.json", "{\"a\": 1,");
  expect_user_error([&] { BpeTokenizer::load(dir.path()); }, {"encoder.json", "malformed JSON"});
  write_whole_file(dir / "encoder.json", "[1, 2]");
  expect_user_error([&] { BpeTokenizer::load(dir.path()); }, {"encoder.json", "JSON object"});
  write_whole_file(dir / "encoder.json", "{\"a\": \"x\"}");
  expect_user_error([&] { BpeTokenizer::load(dir.path()); }, {"encoder.json", "'a'"});
  write_whole_file(dir / "encoder.json", "{\"a\": {\"b\": 1}}");
  expect_user_error([&] { BpeTokenizer::load(dir.path()); }, {"encoder.json", "'a'"});
  write_whole_file(dir / "encoder.json", "{\"a\": 16777216}");
  expect_user_error([&] { BpeTokenizer::load(dir.path()); }, {"encoder.json", "'a'", "2^24"});
  write_whole_file(dir / "encoder.json", "{\"a\": -1}");
  expect_user_error([&] { BpeTokenizer::load(dir.path()); }, {"encoder.json", "'a'", "2^24"});
  write_whole_file(dir / "encoder.json", "{}");
  expect_user_error([&] { BpeTokenizer::load(dir.path()); }, {"encoder.json", "JSON object"});
  write_whole_file(dir / "encoder.json", "{\"a\": 0, \"b\": 0}");
  expect_user_error([&] { BpeTokenizer::load(dir.path()); }, {"encoder.json", "id 0", "two tokens"});
  write_whole_file(dir / "encoder.json", "{\"a\": 0, \"b\": 1}");
  expect_user_error([&] { BpeTokenizer::load(dir.path()); }, {"encoder.json", "byte 0x"});
}

// GPT-2's printable stand-in for a byte: itself when printable, else 256, 257, ... in order.
int byte_code_point(int byte) {
  auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; };
  if (printable(byte)) return byte;
  int before = 0;
  for (int b = 0; b < byte; ++b) before += !printable(b);
  return 256 + before;
}

// Every byte's token, then `extra` (JSON members without braces).
std::string all_bytes_encoder(const std::string& extra) {
  std::string json = "{";
  for (int b = 0; b < 256; ++b) json += fmt::format("\"\\u{:04x}\": {}, ", byte_code_point(b), b);
  return json + extra + "}";
}

TEST(TokenizerFiles, EncoderJsonTokenGivenTwice) {
  TempDir dir;
  write_whole_file(dir / "vocab.bpe", "#version: 0.2\n");
  write_whole_file(dir / "encoder.json", all_bytes_encoder("\"<|x|>\": 256"));
  EXPECT_NO_THROW(BpeTokenizer::load(dir.path()));
  write_whole_file(dir / "encoder.json", all_bytes_encoder("\"a\": 256"));
  expect_user_error([&] { BpeTokenizer::load(dir.path()); }, {"encoder.json", "'a'", "twice"});
  write_whole_file(dir / "encoder.json", all_bytes_encoder("\"<|x|>\": 256, \"<|x|>\": 257"));
  expect_user_error([&] { BpeTokenizer::load(dir.path()); }, {"encoder.json", "<|x|>", "twice"});
}

TEST(TokenizerFiles, BadMergesLineNamesFileAndLine) {
  SPS_GPT2_OR_SKIP(gpt2);  // for the real files
  (void)gpt2;
  const std::string home = sps_home() + "/gpt2";
  TempDir dir;
  write_whole_file(dir / "encoder.json", read_whole_file(home + "/encoder.json"));
  const std::string merges = read_whole_file(home + "/vocab.bpe");
  write_whole_file(dir / "vocab.bpe", "#version: 0.2\n\xC4\xA0 t x\n");
  expect_user_error([&] { BpeTokenizer::load(dir.path()); }, {"vocab.bpe:2", "one space"});
  write_whole_file(dir / "vocab.bpe", "#version: 0.2\n\xC4\xA0 t\nzzqq x\n");
  expect_user_error([&] { BpeTokenizer::load(dir.path()); }, {"vocab.bpe:3", "earlier merge"});
  write_whole_file(dir / "vocab.bpe", "#version: 0.2\n\xC4\xA0 t\n\xE2\x82\xAC x\n");
  expect_user_error([&] { BpeTokenizer::load(dir.path()); }, {"vocab.bpe:3", "byte alphabet"});
  write_whole_file(dir / "vocab.bpe", "#version: 0.2\n\xC4\xA0 t\n\xC4\xA0 t\n");
  expect_user_error([&] { BpeTokenizer::load(dir.path()); }, {"vocab.bpe:3", "already"});
  // The first error in line order, whichever check finds it.
  write_whole_file(dir / "vocab.bpe", "#version: 0.2\n\xC4\xA0 t\nzzqq x\na b c\n");
  expect_user_error([&] { BpeTokenizer::load(dir.path()); }, {"vocab.bpe:3", "earlier merge", "'zzqq x'"});
  write_whole_file(dir / "vocab.bpe", "#version: 0.2\n\xC4\x8A q\n");  // "\nq" is no GPT-2 token
  expect_user_error([&] { BpeTokenizer::load(dir.path()); }, {"vocab.bpe:2", "does not have"});
  write_whole_file(dir / "vocab.bpe", "#version: 0.2\n\xC4\xA0 t\n\xFF\n");
  expect_user_error([&] { BpeTokenizer::load(dir.path()); }, {"vocab.bpe", "not valid UTF-8"});
  // The real file loads and gives GPT-2's ids.
  write_whole_file(dir / "vocab.bpe", merges);
  EXPECT_EQ(BpeTokenizer::load(dir.path()).encode("hello world"), (Ids{31373, 995}));
}

TEST(TokenizerFiles, BadRankFileLines) {
  TempDir dir;
  std::string good;
  for (int b = 0; b < 256; ++b) {
    static const char* digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    good += std::string{digits[b >> 2], digits[(b & 3) << 4], '=', '='} + " " + std::to_string(b) + "\n";
  }
  const std::string path = dir / "r.tiktoken";
  write_whole_file(path, good + "aGk= 256\n");  // "hi"
  const BpeTokenizer ok = BpeTokenizer::load(path);
  EXPECT_EQ(ok.encode("hi"), (Ids{256}));
  EXPECT_EQ(ok.eos_id(), 257u);
  EXPECT_EQ(ok.predict_id(), 258u);
  EXPECT_EQ(ok.padded_vocab_size(), 320u);
  EXPECT_EQ(ok.pad_id(), 319u);
  write_whole_file(path, good + "aGk 256\n");
  expect_user_error([&] { BpeTokenizer::load(path); }, {"r.tiktoken:257", "base64"});
  write_whole_file(path, good + "aGk= x\n");
  expect_user_error([&] { BpeTokenizer::load(path); }, {"r.tiktoken:257", "rank"});
  write_whole_file(path, good + "aGk= 5\n");
  expect_user_error([&] { BpeTokenizer::load(path); }, {"r.tiktoken:257", "line 6"});
  write_whole_file(path, good + "aGk=256\n");
  expect_user_error([&] { BpeTokenizer::load(path); }, {"r.tiktoken:257"});
  write_whole_file(path, "aGk= 0\n");
  expect_user_error([&] { BpeTokenizer::load(path); }, {"r.tiktoken", "byte 0x00"});
}

}  // namespace
}  // namespace sps
