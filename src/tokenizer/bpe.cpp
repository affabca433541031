// The encoder and decoder of BpeTokenizer. Its tables come from the loaders: gpt2_files.cpp,
// rank_file.cpp and load.cpp.
#include "tokenizer/bpe.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <queue>

#include "tokenizer/bpe_impl.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace sps {

uint64_t BpeTokenizer::Impl::next_serial() {
  static std::atomic<uint64_t> count{0};
  return ++count;
}

void BpeTokenizer::Impl::finish(const std::string& source) {
  table.finish();
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    const uint32_t id = table.find(std::string_view(&c, 1));
    if (id == kNone)
      fail("{}: byte 0x{:02x} has no token (a byte-level BPE needs all 256)", source, b);
    byte_id[b] = id;
  }
  uint32_t limit = static_cast<uint32_t>(table.id_limit());
  for (const auto& [id, text] : specials) limit = std::max(limit, id + 1);
  bool has_eos = false;
  for (const auto& [id, text] : specials)
    if (text == kEndOfText) eos = id, has_eos = true;
  if (!has_eos) {
    eos = limit++;
    specials[eos] = kEndOfText;
  }
  vocab_size = limit;
  priority.resize(table.id_limit(), kNone);
}

BpeWorkspace& BpeTokenizer::Impl::acquire() const {
  thread_local uint64_t last_serial = 0;
  thread_local BpeWorkspace* last = nullptr;
  if (last_serial == serial && !last->in_use.exchange(true, std::memory_order_acquire))
    return *last;
  std::lock_guard<std::mutex> lock(pool_mutex);
  BpeWorkspace* ws = nullptr;
  for (const auto& w : pool)
    if (!w->in_use.exchange(true, std::memory_order_acquire)) {
      ws = w.get();
      break;
    }
  if (!ws) {
    ws = pool.emplace_back(std::make_unique<BpeWorkspace>(pre)).get();
    ws->in_use.store(true, std::memory_order_relaxed);
  }
  last_serial = serial;
  last = ws;
  return *ws;
}

// Pieces up to this many bytes are merged by rescanning all pairs (fast for short words);
// longer ones use a heap, so a megabyte without spaces stays O(n log n).
constexpr size_t kLongPiece = 128;

void BpeTokenizer::Impl::merge_short(std::string_view piece, BpeWorkspace& ws) const {
  const size_t n = piece.size();
  auto& starts = ws.starts;  // part k = piece[starts[k], starts[k + 1])
  auto& ranks = ws.ranks;    // ranks[k]: priority of merging parts k and k + 1
  auto& ids = ws.ids;        // ids[k]: token of that merge
  starts.resize(n + 1);
  ranks.resize(n);
  ids.resize(n);
  for (size_t k = 0; k <= n; ++k) starts[k] = static_cast<uint32_t>(k);
  auto pair = [&](size_t k) {
    const std::string_view bytes = piece.substr(starts[k], starts[k + 2] - starts[k]);
    ids[k] = table.find(bytes);
    ranks[k] = pair_priority(ids[k]);
  };
  size_t parts = n;
  for (size_t k = 0; k + 1 < parts; ++k) pair(k);
  while (parts > 1) {
    uint32_t best = kNone;
    size_t at = 0;
    for (size_t k = 0; k + 1 < parts; ++k)
      if (ranks[k] < best) best = ranks[k], at = k;
    if (best == kNone) break;
    // Parts at and at + 1 become one; the pairs around it change.
    starts.erase(starts.begin() + at + 1);
    ranks.erase(ranks.begin() + at + 1);
    ids.erase(ids.begin() + at + 1);
    --parts;
    if (at + 1 < parts) pair(at);
    else ranks[at] = kNone;
    if (at > 0) pair(at - 1);
  }
  for (size_t k = 0; k < parts; ++k) {
    const std::string_view bytes = piece.substr(starts[k], starts[k + 1] - starts[k]);
    ws.piece_ids.push_back(bytes.size() == 1 ? byte_id[static_cast<unsigned char>(bytes[0])]
                                             : table.find(bytes));
  }
}

void BpeTokenizer::Impl::merge_long(std::string_view piece, BpeWorkspace& ws) const {
  const uint32_t n = static_cast<uint32_t>(piece.size());
  auto& next = ws.next;  // parts are identified by their first byte
  auto& prev = ws.prev;
  auto& end = ws.end;
  auto& id = ws.ids;
  next.resize(n), prev.resize(n), end.resize(n), id.resize(n);
  for (uint32_t k = 0; k < n; ++k) {
    next[k] = k + 1 < n ? k + 1 : kNone;
    prev[k] = k > 0 ? k - 1 : kNone;
    end[k] = k + 1;
    id[k] = byte_id[static_cast<unsigned char>(piece[k])];
  }
  struct Candidate {
    uint32_t priority, left, right_end, token;
    bool operator>(const Candidate& o) const {
      return priority != o.priority ? priority > o.priority : left > o.left;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto consider = [&](uint32_t left) {
    if (left == kNone || next[left] == kNone) return;
    const uint32_t right_end = end[next[left]];
    const uint32_t token = table.find(piece.substr(left, right_end - left));
    if (token != kNone) heap.push(Candidate{priority[token], left, right_end, token});
  };
  for (uint32_t k = 0; k + 1 < n; ++k) consider(k);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    const uint32_t right = next[c.left];
    // Stale when either part has changed since the candidate was pushed. (A merged-away
    // part never becomes a left part again, and its `next` is cleared below.)
    if (right == kNone || end[c.left] != right || end[right] != c.right_end) continue;
    end[c.left] = c.right_end;
    id[c.left] = c.token;
    next[c.left] = next[right];
    if (next[right] != kNone) prev[next[right]] = c.left;
    next[right] = kNone;
    end[right] = 0;
    consider(prev[c.left]);
    consider(c.left);
  }
  for (uint32_t k = 0; k != kNone; k = next[k]) ws.piece_ids.push_back(id[k]);
}

void BpeTokenizer::Impl::encode_piece(std::string_view piece, BpeWorkspace& ws,
                                      std::vector<uint32_t>& out) const {
  if (piece.size() == 1) {
    out.push_back(byte_id[static_cast<unsigned char>(piece[0])]);
    return;
  }
  const uint64_t h = hash_bytes(piece.data(), piece.size());
  const uint32_t whole = table.find(piece, h);
  if (whole != kNone) {
    out.push_back(whole);
    return;
  }
  size_t count = 0;
  if (const uint32_t* cached = ws.cache.find(piece, h, &count)) {
    out.insert(out.end(), cached, cached + count);
    return;
  }
  ws.piece_ids.clear();
  if (piece.size() <= kLongPiece) merge_short(piece, ws);
  else merge_long(piece, ws);
  ws.cache.insert(piece, h, ws.piece_ids.data(), ws.piece_ids.size());
  out.insert(out.end(), ws.piece_ids.begin(), ws.piece_ids.end());
}

BpeTokenizer::BpeTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BpeTokenizer::BpeTokenizer(BpeTokenizer&&) noexcept = default;
BpeTokenizer& BpeTokenizer::operator=(BpeTokenizer&&) noexcept = default;
BpeTokenizer::~BpeTokenizer() = default;

void BpeTokenizer::encode(std::string_view text, std::vector<uint32_t>& out,
                          EncodeStats* stats) const {
  struct Borrowed {
    const Impl& impl;
    BpeWorkspace& ws;
    ~Borrowed() { impl.release(ws); }
  } borrowed{*impl_, impl_->acquire()};
  BpeWorkspace& w = borrowed.ws;
  const size_t before = out.size();
  size_t replacements = 0;
  std::string_view valid = text;
  if (find_invalid_utf8(text) != std::string_view::npos) {
    w.repaired.clear();
    replacements = append_repaired_utf8(text, w.repaired);
    valid = w.repaired;
  }
  w.matcher.split(valid, [&](std::string_view piece) { impl_->encode_piece(piece, w, out); });
  if (stats) {
    stats->bytes += text.size();
    stats->replacements += replacements;
    stats->tokens += out.size() - before;
  }
}

std::vector<uint32_t> BpeTokenizer::encode(std::string_view text, EncodeStats* stats) const {
  std::vector<uint32_t> out;
  encode(text, out, stats);
  return out;
}

bool BpeTokenizer::is_token(uint32_t id) const {
  return impl_->table.contains(id) || impl_->specials.count(id) || id == predict_id() ||
         id == pad_id();
}

std::string BpeTokenizer::decode(std::span<const uint32_t> ids) const {
  std::string out;
  for (uint32_t id : ids) {
    if (impl_->table.contains(id)) {
      out.append(impl_->table.bytes(id));
    } else if (auto it = impl_->specials.find(id); it != impl_->specials.end()) {
      out.append(it->second);
    } else if (id == predict_id()) {
      out.append("<|predict|>");
    } else if (id == pad_id()) {
      out.append("<|pad|>");
    } else {
      fail("id {} is not a token of tokenizer {} (vocabulary {}, padded {})", id, impl_->name,
           vocab_size(), padded_vocab_size());
    }
  }
  return out;
}

uint32_t BpeTokenizer::vocab_size() const { return impl_->vocab_size; }
uint32_t BpeTokenizer::eos_id() const { return impl_->eos; }
uint32_t BpeTokenizer::predict_id() const { return impl_->vocab_size; }
uint32_t BpeTokenizer::padded_vocab_size() const { return (impl_->vocab_size + 1 + 63) / 64 * 64; }
uint32_t BpeTokenizer::pad_id() const { return padded_vocab_size() - 1; }
const std::string& BpeTokenizer::name() const { return impl_->name; }

std::string BpeTokenizer::fingerprint() const {
  std::string all;
  for (uint32_t id = 0; id < impl_->table.id_limit(); ++id) {
    if (!impl_->table.contains(id)) continue;
    const std::string_view b = impl_->table.bytes(id);
    // "{id} {priority} {size}\n{bytes}", without a format call per token (loading GPT-2 and
    // this loop are fixed costs of every `data prepare`).
    for (const uint64_t number : {uint64_t{id}, uint64_t{impl_->priority[id]}, uint64_t{b.size()}}) {
      char digits[24];
      all.append(digits, std::to_chars(digits, digits + sizeof digits, number).ptr);
      all += ' ';
    }
    all.back() = '\n';
    all.append(b);
  }
  std::vector<std::pair<uint32_t, std::string>> specials(impl_->specials.begin(), impl_->specials.end());
  std::sort(specials.begin(), specials.end());
  for (const auto& [id, text] : specials) all += fmt::format("special {} {}\n", id, text);
  return fmt::format("{:016x}", hash_bytes(all.data(), all.size()));
}

}  // namespace sps
