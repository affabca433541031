#pragma once
// Byte-level BPE tokenizer: GPT-2's encoding (tiktoken `gpt2`, `encode_ordinary` semantics:
// the text `<|endoftext|>` is encoded as ordinary text) or any tokenizer in the same scheme.
//
// Files it loads:
//  - GPT-2's `encoder.json` + `vocab.bpe` (a folder holding both): token strings in GPT-2's
//    byte-to-unicode alphabet; a token made by merge line i has merge priority i.
//  - a tiktoken rank file (one `base64(token bytes) rank` per line; the rank is both the id
//    and the merge priority; all 256 single bytes must be present). `sps tokenizer train`
//    writes this format.
//
// Encoding: ill-formed UTF-8 is first repaired (each maximal ill-formed subpart becomes
// U+FFFD, as Python's errors="replace"); the pre-tokenizer (pretokenizer.h) cuts the text
// into pieces; a piece that is itself a token is that token, otherwise its bytes are merged
// pairwise, always the adjacent pair whose concatenation has the lowest priority (leftmost
// on ties), until no adjacent pair forms a token.
//
// Special ids (docs/model.md §2): EOS = the `<|endoftext|>` entry of encoder.json, else the first id
// after the ranks; vocab_size() counts EOS; PREDICT = vocab_size(); the padded vocabulary V is
// vocab_size() + 1 rounded up to a multiple of 64; PAD = V - 1. GPT-2: 50256, 50257, 50304,
// 50303.
//
// encode() and decode() are const and thread-safe; each thread borrows a workspace (regex
// match state and a bounded piece -> ids cache) from a pool, the same one each time while
// it is free.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sps {

struct EncodeStats {
  size_t bytes = 0;         // input bytes seen
  size_t replacements = 0;  // ill-formed UTF-8 subsequences replaced by U+FFFD
  size_t tokens = 0;        // ids produced
  EncodeStats& operator+=(const EncodeStats& other) {
    bytes += other.bytes, replacements += other.replacements, tokens += other.tokens;
    return *this;
  }
};

class BpeTokenizer {
 public:
  // `spec`: "gpt2" (GPT-2's files in sps_home()/gpt2; util/sps_home.h), a folder with
  // encoder.json + vocab.bpe, or a tiktoken rank file. Bad or missing files raise UserError.
  static BpeTokenizer load(const std::string& spec);
  static BpeTokenizer from_gpt2_files(const std::string& encoder_json,
                                      const std::string& vocab_bpe);
  static BpeTokenizer from_rank_file(const std::string& path);
  // tokens[r] = bytes of the token of rank (= id) r; all 256 single bytes must appear.
  static BpeTokenizer from_ranks(std::vector<std::string> tokens, std::string name);

  BpeTokenizer(BpeTokenizer&&) noexcept;
  BpeTokenizer& operator=(BpeTokenizer&&) noexcept;
  ~BpeTokenizer();

  // Appends the ids of `text` to `out`; adds to *stats when given.
  void encode(std::string_view text, std::vector<uint32_t>& out,
              EncodeStats* stats = nullptr) const;
  std::vector<uint32_t> encode(std::string_view text, EncodeStats* stats = nullptr) const;

  // Bytes of the ids, concatenated (EOS gives "<|endoftext|>", PREDICT "<|predict|>", PAD
  // "<|pad|>"). An id that is no token raises UserError. The result need not be UTF-8 when
  // the ids split a character.
  std::string decode(std::span<const uint32_t> ids) const;
  bool is_token(uint32_t id) const;

  uint32_t vocab_size() const;         // ids in use, EOS included (GPT-2: 50257)
  uint32_t eos_id() const;             // 50256 for GPT-2
  uint32_t predict_id() const;         // first id after the vocabulary
  uint32_t padded_vocab_size() const;  // V, a multiple of 64
  uint32_t pad_id() const;             // V - 1

  const std::string& name() const;  // "gpt2" or the path loaded
  std::string fingerprint() const;  // 16 hex digits over ids, bytes and priorities

  // Writes the tokenizer as a tiktoken rank file (atomically). Only tokenizers whose merge
  // priorities equal their ids (all rank files, and GPT-2) can be written.
  void save_rank_file(const std::string& path) const;

  struct Impl;

 private:
  explicit BpeTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sps
