#pragma once
// The mergeable tokens of a BPE tokenizer: id -> bytes, and bytes -> id through a hash table
// built for the encoder's hot loop.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/short_bytes.h"
#include "util/error.h"

namespace sps {

// No token: an id no table holds, and the priority of a pair that does not merge.
inline constexpr uint32_t kNone = UINT32_MAX;

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
          (key.size() <= 8 ||
           same_bytes(arena_.data() + offsets_[s.id].offset + 8, key.data() + 8, key.size() - 8)))
        return s.id;
    }
  }
  uint32_t find(std::string_view key) const {
    return find(key, hash_bytes(key.data(), key.size()));
  }
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

}  // namespace sps
