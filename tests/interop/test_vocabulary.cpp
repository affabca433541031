// The tokenizer as GGUF and Hugging Face store it: GPT-2's byte-to-unicode strings and the
// merges recovered from the ranks.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "interop/export_vocabulary.h"
#include "util/error.h"
#include "util/sps_home.h"

namespace sps {
namespace {

// 256 single bytes, then ab, abc, cd, abcd: EOS = 260, V = 320.
BpeTokenizer small_tokenizer() {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.emplace_back(1, char(b));
  for (const char* t : {"ab", "abc", "cd", "abcd"}) tokens.emplace_back(t);
  return BpeTokenizer::from_ranks(tokens, "small");
}

ModelConfig small_config() {
  ModelConfig c;
  c.vocab_size = 320;
  c.eos_token_id = 260;
  c.predict_token_id = 261;
  c.pad_token_id = 319;
  return c;
}

TEST(ExportVocabulary, ByteAlphabet) {
  EXPECT_EQ(bytes_to_unicode_text("a"), "a");
  EXPECT_EQ(bytes_to_unicode_text(" "), "\u0120");
  EXPECT_EQ(bytes_to_unicode_text(std::string(1, '\0')), "\u0100");
  EXPECT_EQ(bytes_to_unicode_text("\n"), "\u010A");
  EXPECT_EQ(bytes_to_unicode_text("\x7f"), "\u0121");
  EXPECT_EQ(bytes_to_unicode_text("\xad"), "\u0143");
  EXPECT_EQ(bytes_to_unicode_text("\xae"), "\u00AE");
}

TEST(ExportVocabulary, MergesRecoveredFromRanks) {
  const ExportVocabulary v = export_vocabulary(small_tokenizer(), small_config());
  ASSERT_EQ(v.tokens.size(), 320u);
  EXPECT_EQ(v.tokens[97], "a");
  EXPECT_EQ(v.tokens[32], "\u0120");
  EXPECT_EQ(v.tokens[256], "ab");
  EXPECT_EQ(v.tokens[259], "abcd");
  EXPECT_EQ(v.tokens[260], "<|endoftext|>");
  EXPECT_EQ(v.tokens[261], "[PAD261]");
  EXPECT_EQ(v.types[97], kTokenNormal);
  EXPECT_EQ(v.types[260], kTokenControl);
  EXPECT_EQ(v.types[319], kTokenUnused);
  EXPECT_EQ(v.eos_id, 260u);
  // abcd: BPE with the lower ranks gives ab·c·d → abc·d (abc ranks before cd).
  EXPECT_EQ(v.merges, (std::vector<std::string>{"a b", "ab c", "c d", "abc d"}));
}

TEST(ExportVocabulary, EosMustBeTheModels) {
  ModelConfig c = small_config();
  c.eos_token_id = 259;
  EXPECT_THROW(export_vocabulary(small_tokenizer(), c), UserError);
  c = small_config();
  c.vocab_size = 256;
  EXPECT_THROW(export_vocabulary(small_tokenizer(), c), UserError);
}

TEST(ExportVocabulary, Gpt2MergesAndTokensEqualItsFiles) {
  const std::string folder = sps_home() + "/gpt2";
  if (!std::filesystem::exists(folder + "/encoder.json") || !std::filesystem::exists(folder + "/vocab.bpe"))
    GTEST_SKIP() << "GPT-2's files are not in " << folder << " (scripts/get-gpt2-files.sh)";
  ModelConfig c;
  c.vocab_size = 50304;
  const ExportVocabulary v = export_vocabulary(BpeTokenizer::load("gpt2"), c);
  std::ifstream merges_in(folder + "/vocab.bpe");
  std::vector<std::string> merges;
  for (std::string line; std::getline(merges_in, line);)
    if (!line.empty() && line.rfind("#version", 0) != 0) merges.push_back(line);
  EXPECT_EQ(v.merges, merges);
  std::ifstream encoder_in(folder + "/encoder.json");
  const nlohmann::json encoder = nlohmann::json::parse(encoder_in);
  ASSERT_EQ(encoder.size(), 50257u);
  for (const auto& [token, id] : encoder.items()) ASSERT_EQ(v.tokens[id.get<size_t>()], token) << id;
}

}  // namespace
}  // namespace sps
