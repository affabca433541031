#include "interop/export_vocabulary.h"

#include <fmt/format.h>

#include <array>
#include <limits>
#include <unordered_map>

#include "util/error.h"

namespace sps {

namespace {

std::string utf8(uint32_t code_point) {
  std::string out;
  if (code_point < 0x80) {
    out += char(code_point);
  } else {  // the alphabet stays below U+0800
    out += char(0xC0 | (code_point >> 6));
    out += char(0x80 | (code_point & 0x3F));
  }
  return out;
}

const std::array<std::string, 256>& byte_alphabet() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
      t[b] = utf8(printable ? b : next++);
    }
    return t;
  }();
  return table;
}

}  // namespace

std::string bytes_to_unicode_text(const std::string& bytes) {
  std::string out;
  for (unsigned char c : bytes) out += byte_alphabet()[c];
  return out;
}

ExportVocabulary export_vocabulary(const BpeTokenizer& tokenizer, const ModelConfig& config) {
  const uint32_t eos = tokenizer.eos_id();
  if (int64_t(eos) != config.eos_token_id)
    fail("tokenizer {}: its end-of-text id is {}, the model's EOS is {}", tokenizer.name(), eos,
         config.eos_token_id);
  if (int64_t(tokenizer.vocab_size()) > config.vocab_size)
    fail("tokenizer {}: {} tokens do not fit the model's vocabulary of {}", tokenizer.name(),
         tokenizer.vocab_size(), config.vocab_size);
  ExportVocabulary v;
  v.eos_id = eos;
  v.tokens.resize(size_t(config.vocab_size));
  v.types.assign(size_t(config.vocab_size), kTokenUnused);
  std::vector<std::string> bytes(eos);  // the ranked tokens, EOS excluded
  std::unordered_map<std::string, uint32_t> rank;
  for (uint32_t id = 0; id < eos; ++id) {
    const uint32_t one[] = {id};
    bytes[id] = tokenizer.decode(one);
    rank.emplace(bytes[id], id);
    v.tokens[id] = bytes_to_unicode_text(bytes[id]);
    v.types[id] = kTokenNormal;
  }
  v.tokens[eos] = "<|endoftext|>";
  v.types[eos] = kTokenControl;
  for (size_t id = eos + 1; id < v.tokens.size(); ++id) v.tokens[id] = fmt::format("[PAD{}]", id);

  for (uint32_t r = 0; r < eos; ++r) {
    if (bytes[r].size() < 2) continue;
    std::vector<std::string> parts;
    for (char c : bytes[r]) parts.emplace_back(1, c);
    while (parts.size() > 2) {
      size_t best = parts.size();
      uint32_t best_rank = r;
      for (size_t i = 0; i + 1 < parts.size(); ++i) {
        const auto it = rank.find(parts[i] + parts[i + 1]);
        if (it != rank.end() && it->second < best_rank) best = i, best_rank = it->second;
      }
      if (best == parts.size()) break;
      parts[best] += parts[best + 1];
      parts.erase(parts.begin() + std::ptrdiff_t(best) + 1);
    }
    if (parts.size() != 2 || !rank.count(parts[0]) || !rank.count(parts[1]))
      fail("tokenizer {}: token {} is not the merge of two lower-ranked tokens", tokenizer.name(), r);
    v.merges.push_back(bytes_to_unicode_text(parts[0]) + " " + bytes_to_unicode_text(parts[1]));
  }
  return v;
}

}  // namespace sps
