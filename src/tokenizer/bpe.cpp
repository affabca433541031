#include "tokenizer/bpe.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <queue>
#include <set>
#include <sstream>
#include <unordered_map>

#include "tokenizer/pretokenizer.h"
#include "tokenizer/utf8.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/read_file.h"

namespace sps {

namespace {

constexpr uint32_t kNone = UINT32_MAX;
constexpr char kEndOfText[] = "<|endoftext|>";

uint64_t hash_bytes(const char* p, size_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xFF51AFD7ED558CCDull);
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
    p += 8, n -= 8;
  }
  if (n) {
    uint64_t w = 0;
    std::memcpy(&w, p, n);
    h = (h ^ w) * 0x94D049BB133111EBull;
    h ^= h >> 29;
  }
  h *= 0xD6E8FEB86659FD93ull;
  h ^= h >> 32;
  return h;
}

// Equality of two short byte strings of the same length, without a call to memcmp.
inline bool same_bytes(const char* a, const char* b, size_t n) {
  if (n >= 8) {
    uint64_t x, y;
    for (size_t i = 0; i + 8 <= n; i += 8) {
      std::memcpy(&x, a + i, 8), std::memcpy(&y, b + i, 8);
      if (x != y) return false;
    }
    std::memcpy(&x, a + n - 8, 8), std::memcpy(&y, b + n - 8, 8);
    return x == y;
  }
  if (n >= 4) {
    uint32_t x, y, u, v;
    std::memcpy(&x, a, 4), std::memcpy(&y, b, 4);
    std::memcpy(&u, a + n - 4, 4), std::memcpy(&v, b + n - 4, 4);
    return x == y && u == v;
  }
  for (size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return false;
  return true;
}

// The first (up to) 8 bytes of a string, zero-padded.
inline uint64_t prefix8(std::string_view s) {
  uint64_t w = 0;
  std::memcpy(&w, s.data(), std::min<size_t>(8, s.size()));
  return w;
}

// The mergeable tokens: id -> bytes, and bytes -> id through an open-addressing table whose
// slots hold each token's first 8 bytes, so most lookups touch one cache line.
class TokenTable {
 public:
  void add(uint32_t id, std::string_view bytes) {
    SPS_ASSERT(slots_.empty());  // before finish()
    if (id >= offsets_.size()) offsets_.resize(id + 1, {0, kNone});
    offsets_[id] = {static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(bytes.size())};
    arena_.append(bytes);
    ids_.push_back(id);
  }
  // Builds the lookup table after the last add(); a second call keeps the one built.
  void finish() {
    if (!slots_.empty()) return;
    size_t capacity = 16;
    while (capacity < ids_.size() * 2) capacity *= 2;
    slots_.assign(capacity, Slot{0, kNone, 0});
    mask_ = capacity - 1;
    for (uint32_t id : ids_) {
      const std::string_view b = bytes(id);
      size_t i = hash_bytes(b.data(), b.size()) & mask_;
      while (slots_[i].id != kNone) i = (i + 1) & mask_;
      slots_[i] = Slot{prefix8(b), id, static_cast<uint32_t>(b.size())};
    }
  }
  // Takes a token out, after finish(): its slot stays, matching no key, so that the probe
  // sequences through it still reach the tokens behind.
  void remove(uint32_t id) {
    const std::string_view b = bytes(id);
    for (size_t i = hash_bytes(b.data(), b.size()) & mask_;; i = (i + 1) & mask_)
      if (slots_[i].id == id) {
        slots_[i].size = kNone;
        break;
      }
    offsets_[id] = {0, kNone};
    while (!offsets_.empty() && offsets_.back().size == kNone) offsets_.pop_back();  // id_limit()
    ids_.erase(std::find(ids_.begin(), ids_.end(), id));
  }
  uint32_t find(std::string_view key, uint64_t h) const {
    const uint64_t prefix = prefix8(key);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.id == kNone) return kNone;
      if (s.prefix == prefix && s.size == key.size() &&
          (key.size() <= 8 || same_bytes(arena_.data() + offsets_[s.id].offset + 8, key.data() + 8,
                                         key.size() - 8)))
        return s.id;
    }
  }
  uint32_t find(std::string_view key) const { return find(key, hash_bytes(key.data(), key.size())); }
  bool contains(uint32_t id) const { return id < offsets_.size() && offsets_[id].size != kNone; }
  std::string_view bytes(uint32_t id) const {
    const Span& span = offsets_[id];
    return {arena_.data() + span.offset, span.size};
  }
  const std::vector<uint32_t>& ids() const { return ids_; }  // in insertion order
  size_t id_limit() const { return offsets_.size(); }

 private:
  struct Span {
    uint32_t offset, size;
  };
  struct Slot {
    uint64_t prefix;
    uint32_t id, size;
  };
  std::string arena_;
  std::vector<Span> offsets_;  // by id; size kNone = not a mergeable token
  std::vector<uint32_t> ids_;
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

// Bounded piece -> ids cache. Open addressing; emptied when half full.
class WordCache {
 public:
  static constexpr size_t kSlots = 1 << 16;
  static constexpr size_t kMaxKey = 255;

  WordCache() : slots_(kSlots) {}

  // Returns the cached ids or nullptr.
  const uint32_t* find(std::string_view key, uint64_t h, size_t* count) const {
    for (size_t i = h & (kSlots - 1);; i = (i + 1) & (kSlots - 1)) {
      const Slot& s = slots_[i];
      if (s.key_size == 0) return nullptr;
      if (s.hash == h && s.key_size == key.size() &&
          same_bytes(keys_.data() + s.key_offset, key.data(), key.size())) {
        *count = s.value_size;
        return values_.data() + s.value_offset;
      }
    }
  }
  void insert(std::string_view key, uint64_t h, const uint32_t* ids, size_t count) {
    if (key.empty() || key.size() > kMaxKey || count > UINT16_MAX) return;
    if (entries_ >= kSlots / 2) clear();
    size_t i = h & (kSlots - 1);
    while (slots_[i].key_size != 0) i = (i + 1) & (kSlots - 1);
    slots_[i] = Slot{h, static_cast<uint32_t>(keys_.size()), static_cast<uint32_t>(values_.size()),
                     static_cast<uint16_t>(key.size()), static_cast<uint16_t>(count)};
    keys_.append(key);
    values_.insert(values_.end(), ids, ids + count);
    ++entries_;
  }

 private:
  void clear() {
    std::fill(slots_.begin(), slots_.end(), Slot{});
    keys_.clear();
    values_.clear();
    entries_ = 0;
  }
  struct Slot {
    uint64_t hash = 0;
    uint32_t key_offset = 0, value_offset = 0;
    uint16_t key_size = 0, value_size = 0;
  };
  std::vector<Slot> slots_;
  std::string keys_;
  std::vector<uint32_t> values_;
  size_t entries_ = 0;
};

// GPT-2's reversible map from bytes to printable code points (token strings in
// encoder.json and vocab.bpe are written in it).
struct ByteAlphabet {
  std::array<uint32_t, 256> to_code_point{};
  std::array<int, 512> to_byte{};  // by code point; -1 = not in the alphabet
  ByteAlphabet() {
    to_byte.fill(-1);
    uint32_t extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      to_code_point[b] = printable ? b : 256 + extra++;
      to_byte[to_code_point[b]] = b;
    }
  }
  // Token string -> bytes; false if a character is not in the alphabet.
  bool decode(std::string_view s, std::string& out) const {
    out.clear();
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    size_t i = 0;
    while (i < s.size()) {
      uint32_t cp;
      size_t len = utf8_sequence_length(s, i, nullptr);
      if (len == 1) {
        cp = p[i];
      } else if (len == 2) {
        cp = ((p[i] & 0x1Fu) << 6) | (p[i + 1] & 0x3Fu);
      } else {
        return false;  // ill-formed, or beyond U+07FF: not in the alphabet
      }
      if (cp >= to_byte.size() || to_byte[cp] < 0) return false;
      out.push_back(static_cast<char>(to_byte[cp]));
      i += len;
    }
    return true;
  }
};

const ByteAlphabet& byte_alphabet() {
  static const ByteAlphabet alphabet;
  return alphabet;
}

bool is_directory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string printable(std::string_view s) {
  std::string out;
  for (unsigned char c : s.substr(0, 80)) {
    if (c >= 0x20 && c < 0x7F) out.push_back(static_cast<char>(c));
    else out += fmt::format("\\x{:02x}", c);
  }
  if (s.size() > 80) out += "...";
  return out;
}

int base64_value(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Strict standard base64 with padding; false on anything else.
bool base64_decode(std::string_view s, std::string& out) {
  out.clear();
  if (s.empty() || s.size() % 4 != 0) return false;
  for (size_t i = 0; i < s.size(); i += 4) {
    const bool last = i + 4 == s.size();
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const unsigned char c = static_cast<unsigned char>(s[i + k]);
      if (c == '=' && last && k >= 2) {
        v[k] = 0, ++pad;
      } else {
        if (pad) return false;  // data after padding
        v[k] = base64_value(c);
        if (v[k] < 0) return false;
      }
    }
    const uint32_t triple = (v[0] << 18) | (v[1] << 12) | (v[2] << 6) | v[3];
    out.push_back(static_cast<char>(triple >> 16));
    if (pad < 2) out.push_back(static_cast<char>((triple >> 8) & 0xFF));
    if (pad < 1) out.push_back(static_cast<char>(triple & 0xFF));
  }
  return true;
}

std::string base64_encode(std::string_view bytes) {
  static const char digits[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t triple = 0;
    for (size_t k = 0; k < 3; ++k)
      triple = (triple << 8) | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0);
    out.push_back(digits[(triple >> 18) & 63]);
    out.push_back(digits[(triple >> 12) & 63]);
    out.push_back(n > 1 ? digits[(triple >> 6) & 63] : '=');
    out.push_back(n > 2 ? digits[triple & 63] : '=');
  }
  return out;
}

// Splits a file into lines (without '\n' or a trailing '\r').
template <typename F>
void for_each_line(std::string_view text, F&& line) {
  size_t number = 0, pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view l = text.substr(pos, end - pos);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    line(++number, l);
    pos = end + 1;
  }
}

}  // namespace

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

  static uint64_t next_serial() {
    static std::atomic<uint64_t> count{0};
    return ++count;
  }

  // Finalises after the table is filled: byte ids, EOS, vocabulary size.
  void finish(const std::string& source) {
    table.finish();
    for (int b = 0; b < 256; ++b) {
      const char c = static_cast<char>(b);
      const uint32_t id = table.find(std::string_view(&c, 1));
      if (id == kNone) fail("{}: byte 0x{:02x} has no token (a byte-level BPE needs all 256)", source, b);
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

  uint32_t pair_priority(uint32_t id) const { return id == kNone ? kNone : priority[id]; }

  // The workspace this thread used last when it is free: taken without a lock, and its word
  // cache is still in this core's caches (sharing one pool mutex and handing workspaces
  // around made two threads ~20% slower than one per document). Else any free one, else a
  // new one. `serial` is never reused, so the remembered pointer of a destroyed tokenizer is
  // never followed.
  BpeWorkspace& acquire() const {
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
  void release(BpeWorkspace& ws) const { ws.in_use.store(false, std::memory_order_release); }

  // Merges the bytes of `piece` into ids (appended to ws.piece_ids).
  void merge_short(std::string_view piece, BpeWorkspace& ws) const;
  void merge_long(std::string_view piece, BpeWorkspace& ws) const;
  void encode_piece(std::string_view piece, BpeWorkspace& ws, std::vector<uint32_t>& out) const;
};

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
    if (digits.empty() || digits.size() > 9) fail("{}:{}: bad rank '{}'", path, number, printable(digits));
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

namespace {

// encoder.json's entries in file order, read through nlohmann's SAX interface: building the
// document (a std::map of 50,257 keys) was most of GPT-2's loading time.
class EncoderEntries : public nlohmann::json_sax<nlohmann::json> {
 public:
  struct Entry {
    std::string token;
    int64_t id;
  };
  std::vector<Entry> entries;
  std::string error;  // why the file is not an object of string -> integer

  bool start_object(std::size_t) override {
    if (depth_ != 0) return value(-1);  // an object as a token's value
    depth_ = 1;
    return true;
  }
  bool end_object() override { return true; }
  bool key(string_t& k) override {
    entries.push_back({std::move(k), -1});
    return true;
  }
  bool number_integer(number_integer_t v) override { return value(v); }
  bool number_unsigned(number_unsigned_t v) override {
    return value(v > (1u << 24) ? int64_t{1} << 24 : static_cast<int64_t>(v));
  }
  bool null() override { return value(-1); }
  bool boolean(bool) override { return value(-1); }
  bool number_float(number_float_t, const string_t&) override { return value(-1); }
  bool string(string_t&) override { return value(-1); }
  bool binary(binary_t&) override { return value(-1); }
  bool start_array(std::size_t) override { return value(-1); }
  bool end_array() override { return false; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    error = fmt::format("malformed JSON ({})", e.what());
    return false;
  }

 private:
  bool expect(bool ok, const char* what) {
    if (!ok) error = fmt::format("expected {} mapping token strings to ids", what);
    return ok;
  }
  // The id of the last key; -1 marks a value that is not an integer.
  bool value(int64_t id) {
    if (depth_ != 1 || entries.empty()) return expect(false, "a JSON object");
    entries.back().id = id;
    if (id >= 0 && id < (1 << 24)) return true;
    error = fmt::format("token '{}' has a value that is not an integer in [0, 2^24)",
                        printable(entries.back().token));
    return false;
  }
  int depth_ = 0;  // 1 inside the top-level object; nested values are refused
};

// vocab.bpe's merge lines with both symbols decoded to bytes, made on a thread of its own
// while encoder.json is parsed. Decoding stops at the first malformed line (`error`); the
// lines before it are kept, so errors still come in line order.
struct MergeLines {
  std::string text;               // the file, for error messages
  std::string bytes;              // each line's left then right symbol, back to back
  std::vector<uint32_t> ends;     // per line: where its left and its right symbol end in `bytes`
  std::vector<uint32_t> numbers;  // per line: its line number in the file
  std::string error;

  // Line `number` of the file, printable, for a message.
  std::string line(size_t number) const {
    std::string found;
    for_each_line(text, [&](size_t n, std::string_view l) {
      if (n == number) found = printable(l);
    });
    return found;
  }
};

MergeLines decode_merge_lines(const std::string& path, const ByteAlphabet& alphabet) {
  MergeLines m;
  m.text = read_file(path, "GPT-2's vocab.bpe");
  if (find_invalid_utf8(m.text) != std::string_view::npos) {
    m.error = fmt::format("{}: not valid UTF-8", path);
    return m;
  }
  std::string symbol_bytes;
  for_each_line(m.text, [&](size_t number, std::string_view line) {
    if (!m.error.empty() || line.empty() || (number == 1 && line.starts_with("#version"))) return;
    const size_t space = line.find(' ');
    if (space == 0 || space == std::string_view::npos || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string_view::npos) {
      m.error = fmt::format("{}:{}: expected two symbols separated by one space, got '{}'", path,
                            number, printable(line));
      return;
    }
    const size_t line_start = m.bytes.size();
    for (const std::string_view symbol : {line.substr(0, space), line.substr(space + 1)}) {
      if (!alphabet.decode(symbol, symbol_bytes)) {
        m.bytes.resize(line_start);
        m.ends.resize(2 * m.numbers.size());
        m.error = fmt::format("{}:{}: '{}' has characters outside GPT-2's byte alphabet", path,
                              number, printable(line));
        return;
      }
      m.bytes += symbol_bytes;
      m.ends.push_back(static_cast<uint32_t>(m.bytes.size()));
    }
    m.numbers.push_back(static_cast<uint32_t>(number));
  });
  return m;
}

}  // namespace

BpeTokenizer BpeTokenizer::from_gpt2_files(const std::string& encoder_json,
                                           const std::string& vocab_bpe) {
  const ByteAlphabet& alphabet = byte_alphabet();
  std::future<MergeLines> merge_lines =
      std::async(std::launch::async, decode_merge_lines, vocab_bpe, std::cref(alphabet));
  EncoderEntries encoder;
  {
    const std::string text = read_file(encoder_json, "GPT-2's encoder.json");
    if (!nlohmann::json::sax_parse(text, &encoder) && encoder.error.empty())
      encoder.error = "malformed JSON";
  }
  if (!encoder.error.empty()) fail("{}: {}", encoder_json, encoder.error);
  if (encoder.entries.empty())
    fail("{}: expected a JSON object mapping token strings to ids", encoder_json);

  // Every token string in the byte alphabet goes into the table, by its bytes; those that
  // are neither a byte nor made by a merge (e.g. <|endoftext|>) leave it again as specials.
  auto impl = std::make_unique<Impl>();
  impl->name = encoder_json;
  TokenTable& table = impl->table;
  int64_t max_id = 0;
  for (const auto& e : encoder.entries) max_id = std::max(max_id, e.id);
  std::vector<uint8_t> id_seen(static_cast<size_t>(max_id) + 1, 0);
  std::string bytes;
  for (const auto& e : encoder.entries) {
    if (id_seen[e.id]++) fail("{}: id {} is given to two tokens", encoder_json, e.id);
    if (alphabet.decode(e.token, bytes) && !bytes.empty())
      table.add(static_cast<uint32_t>(e.id), bytes);
  }
  table.finish();
  for (const auto& e : encoder.entries)
    if (table.contains(e.id) && table.find(table.bytes(e.id)) != e.id)
      fail("{}: token '{}' is given twice", encoder_json, printable(e.token));

  // Merge priority by id: bytes first (never compared: merges make >= 2 bytes), then merges
  // in file order.
  std::vector<uint32_t> priority(id_seen.size(), kNone);
  for (int b = 0; b < 256; ++b) {
    const char single = static_cast<char>(b);
    const uint32_t id = table.find(std::string_view(&single, 1));
    if (id == kNone)
      fail("{}: byte 0x{:02x} has no token (a byte-level BPE needs all 256)", encoder_json, b);
    priority[id] = static_cast<uint32_t>(b);
  }
  const MergeLines merges = merge_lines.get();
  const std::string_view merged(merges.bytes);
  uint32_t start = 0;
  for (size_t i = 0; i < merges.numbers.size(); ++i) {
    const uint32_t middle = merges.ends[2 * i], end = merges.ends[2 * i + 1];
    for (const std::string_view part :
         {merged.substr(start, middle - start), merged.substr(middle, end - middle)}) {
      const uint32_t id = table.find(part);
      if (id == kNone || priority[id] == kNone)
        fail("{}:{}: '{}' is neither a byte nor made by an earlier merge", vocab_bpe,
             merges.numbers[i], merges.line(merges.numbers[i]));
    }
    const uint32_t made = table.find(merged.substr(start, end - start));
    if (made == kNone)
      fail("{}:{}: the merge '{}' makes a token that {} does not have", vocab_bpe,
           merges.numbers[i], merges.line(merges.numbers[i]), encoder_json);
    if (priority[made] != kNone)
      fail("{}:{}: the merge '{}' makes a token that an earlier line already makes", vocab_bpe,
           merges.numbers[i], merges.line(merges.numbers[i]));
    priority[made] = static_cast<uint32_t>(256 + i);
    start = end;
  }
  if (!merges.error.empty()) throw UserError(merges.error);

  std::set<std::string> special_texts;
  for (auto& e : encoder.entries) {
    if (priority[e.id] != kNone) continue;
    if (table.contains(e.id)) table.remove(e.id);
    if (!special_texts.insert(e.token).second)
      fail("{}: token '{}' is given twice", encoder_json, printable(e.token));
    impl->specials[static_cast<uint32_t>(e.id)] = std::move(e.token);
  }
  impl->finish(encoder_json);
  for (uint32_t id : table.ids()) impl->priority[id] = priority[id];
  return BpeTokenizer(std::move(impl));
}

std::string sps_home() {
  if (const char* home = std::getenv("SPS_HOME"); home && *home) return home;
  const char* user_home = std::getenv("HOME");
  if (!user_home || !*user_home) fail("neither SPS_HOME nor HOME is set");
  return std::string(user_home) + "/.cache/sps";
}

BpeTokenizer BpeTokenizer::load(const std::string& spec) {
  if (spec == "gpt2") {
    const std::string dir = sps_home() + "/gpt2";
    if (!exists(dir + "/encoder.json") || !exists(dir + "/vocab.bpe"))
      fail("GPT-2's tokenizer files are not in {} (run `make deps`, or "
           "scripts/get-gpt2-files.sh)", dir);
    auto tokenizer = from_gpt2_files(dir + "/encoder.json", dir + "/vocab.bpe");
    tokenizer.impl_->name = "gpt2";
    return tokenizer;
  }
  if (is_directory(spec)) {
    if (!exists(spec + "/encoder.json") || !exists(spec + "/vocab.bpe"))
      fail("{}: a tokenizer folder must hold encoder.json and vocab.bpe", spec);
    return from_gpt2_files(spec + "/encoder.json", spec + "/vocab.bpe");
  }
  if (!exists(spec))
    fail("{}: no such tokenizer (expected gpt2, a folder with encoder.json + vocab.bpe, "
         "or a tiktoken rank file)", spec);
  return from_rank_file(spec);
}

}  // namespace sps
