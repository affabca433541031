#pragma once
// The inside of BpeTokenizer, shared by its encoder (bpe.cpp) and its loaders
// (gpt2_files.cpp, rank_file.cpp, load.cpp).
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/bpe.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/token_table.h"
#include "tokenizer/word_cache.h"

namespace sps {

inline constexpr char kEndOfText[] = "<|endoftext|>";

// One thread's scratch for encode(): taken from the tokenizer's pool, given back after.
struct BpeWorkspace {
  explicit BpeWorkspace(const PreTokenizer& pre) : matcher(pre) {}
  PreTokenizer::Matcher matcher;
  WordCache cache;
  std::atomic<bool> in_use{false};
  std::string repaired;
  std::vector<uint32_t> starts, ranks, ids, piece_ids;
  // Long pieces: linked parts and a heap of candidate merges.
  std::vector<uint32_t> next, prev, end;
};

struct BpeTokenizer::Impl {
  TokenTable table;
  std::vector<uint32_t> priority;  // by id, for mergeable tokens
  std::array<uint32_t, 256> byte_id{};
  std::unordered_map<uint32_t, std::string> specials;  // non-mergeable ids -> text
  uint32_t vocab_size = 0, eos = 0;
  std::string name;
  PreTokenizer pre;

  const uint64_t serial = next_serial();
  mutable std::mutex pool_mutex;
  mutable std::vector<std::unique_ptr<BpeWorkspace>> pool;  // every workspace made

  static uint64_t next_serial();

  // Finalises after the table is filled: byte ids, EOS, vocabulary size.
  void finish(const std::string& source);

  uint32_t pair_priority(uint32_t id) const { return id == kNone ? kNone : priority[id]; }

  // The workspace this thread used last when it is free: taken without a lock, and its word
  // cache is still in this core's caches (sharing one pool mutex and handing workspaces
  // around made two threads ~20% slower than one per document). Else any free one, else a
  // new one. `serial` is never reused, so the remembered pointer of a destroyed tokenizer is
  // never followed.
  BpeWorkspace& acquire() const;
  void release(BpeWorkspace& ws) const { ws.in_use.store(false, std::memory_order_release); }

  // Merges the bytes of `piece` into ids (appended to ws.piece_ids).
  void merge_short(std::string_view piece, BpeWorkspace& ws) const;
  void merge_long(std::string_view piece, BpeWorkspace& ws) const;
  void encode_piece(std::string_view piece, BpeWorkspace& ws, std::vector<uint32_t>& out) const;
};

}  // namespace sps
