#pragma once
// The encoder's per-workspace memo of recent pieces: text that repeats (most words) is
// merged once.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/short_bytes.h"

namespace sps {

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

}  // namespace sps
