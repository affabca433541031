// Tiktoken rank files (one `base64(token bytes) rank` per line, bpe.h), read and written,
// and tokenizers made from ranks in memory (`sps tokenizer train`).
#include <fmt/format.h>

#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/base64.h"
#include "tokenizer/bpe.h"
#include "tokenizer/bpe_impl.h"
#include "tokenizer/loader_text.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/read_file.h"

namespace sps {

BpeTokenizer BpeTokenizer::from_ranks(std::vector<std::string> tokens, std::string name) {
  auto impl = std::make_unique<Impl>();
  impl->name = std::move(name);
  std::unordered_map<std::string_view, uint32_t> seen;
  for (uint32_t id = 0; id < tokens.size(); ++id) {
    if (tokens[id].empty()) fail("{}: token {} is empty", impl->name, id);
    if (!seen.emplace(tokens[id], id).second)
      fail("{}: tokens {} and {} have the same bytes", impl->name, seen[tokens[id]], id);
    impl->table.add(id, tokens[id]);
  }
  impl->finish(impl->name);
  for (uint32_t id = 0; id < tokens.size(); ++id) impl->priority[id] = id;
  return BpeTokenizer(std::move(impl));
}

BpeTokenizer BpeTokenizer::from_rank_file(const std::string& path) {
  const std::string text = read_file(path, "a tiktoken rank file");
  auto impl = std::make_unique<Impl>();
  impl->name = path;
  std::unordered_map<std::string, size_t> line_of_bytes;
  std::unordered_map<uint32_t, size_t> line_of_rank;
  std::string bytes;
  for_each_line(text, [&](size_t number, std::string_view line) {
    if (line.empty()) return;
    const size_t space = line.find(' ');
    if (space == std::string_view::npos || line.find(' ', space + 1) != std::string_view::npos)
      fail("{}:{}: expected `base64(bytes) rank`, got '{}'", path, number, printable(line));
    if (!base64_decode(line.substr(0, space), bytes) || bytes.empty())
      fail("{}:{}: '{}' is not base64 of a token", path, number, printable(line.substr(0, space)));
    const std::string_view digits = line.substr(space + 1);
    uint64_t rank = 0;
    if (digits.empty() || digits.size() > 9)
      fail("{}:{}: bad rank '{}'", path, number, printable(digits));
    for (char c : digits) {
      if (c < '0' || c > '9') fail("{}:{}: bad rank '{}'", path, number, printable(digits));
      rank = rank * 10 + (c - '0');
    }
    if (auto [it, fresh] = line_of_rank.emplace(static_cast<uint32_t>(rank), number); !fresh)
      fail("{}:{}: rank {} already given on line {}", path, number, rank, it->second);
    if (auto [it, fresh] = line_of_bytes.emplace(bytes, number); !fresh)
      fail("{}:{}: token already given on line {}", path, number, it->second);
    impl->table.add(static_cast<uint32_t>(rank), bytes);
  });
  if (line_of_rank.empty()) fail("{}: no tokens in the rank file", path);
  impl->finish(path);
  for (uint32_t id : impl->table.ids()) impl->priority[id] = id;
  return BpeTokenizer(std::move(impl));
}

void BpeTokenizer::save_rank_file(const std::string& path) const {
  if (eos_id() != impl_->table.id_limit() || impl_->specials.size() != 1)
    fail("{}: tokenizer {} has special tokens that a rank file cannot hold", path, impl_->name);
  std::string text;
  for (uint32_t id = 0; id < impl_->table.id_limit(); ++id) {
    if (!impl_->table.contains(id)) continue;
    if (impl_->priority[id] != id && impl_->table.bytes(id).size() > 1)
      fail("{}: tokenizer {} merges in an order other than its ids; a rank file cannot hold it",
           path, impl_->name);
    text += base64_encode(impl_->table.bytes(id));
    text += fmt::format(" {}\n", id);
  }
  write_file_atomically(path, text);
}

}  // namespace sps
