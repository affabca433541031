#pragma once
// The KV cache of cached generation (docs/model.md §7). Per layer and sequence, for the current
// document only:
//   persistent cache — append-only K (after RoPE) and V of the persistent slots;
//   window ring      — the last `ring_capacity` windowed-slot K/V (w for interleaved
//                      families, capped at the persistent capacity; 0 for standard and w = 0).
// Rows are head-major, [B, H, capacity, D] per layer, so the decode attention of one
// (sequence, head) reads contiguous memory. Lengths are per sequence and shared by all
// layers: a step writes the new rows of every layer first (at persistent_length(b) and
// ring_slot(b)), then `advance` counts them, so attention in a later layer of the same step
// never sees them. Everything is allocated once by `allocate`, in a backend's memory; the
// lengths are host bookkeeping.
#include <cstdint>
#include <vector>

#include "ops/backend.h"

namespace sps {

struct KvCacheShape {
  int64_t layers = 0, batch = 0, heads = 0, head_dim = 0;
  int64_t persistent_capacity = 0;  // rows per sequence: the longest document it will hold
  int64_t ring_capacity = 0;        // windowed rows per sequence (0: no ring)
};

template <typename T>
class KvCache {
 public:
  explicit KvCache(const ops::Memory& memory = ops::cpu_backend<T>()) : data_(memory) {}
  explicit KvCache(const KvCacheShape& shape,
                   const ops::Memory& memory = ops::cpu_backend<T>())
      : data_(memory) {
    allocate(shape);
  }

  void allocate(const KvCacheShape& shape);
  const KvCacheShape& shape() const { return shape_; }

  // [B, H, persistent_capacity, D] and [B, H, ring_capacity, D] of layer l (the backend's
  // memory).
  T* persistent_k(int64_t l) { return data_.data() + l * layer_stride_; }
  T* persistent_v(int64_t l) { return persistent_k(l) + persistent_block_; }
  T* ring_k(int64_t l) { return ring_block_ ? persistent_v(l) + persistent_block_ : nullptr; }
  T* ring_v(int64_t l) { return ring_block_ ? ring_k(l) + ring_block_ : nullptr; }
  const T* persistent_k(int64_t l) const { return data_.data() + l * layer_stride_; }
  const T* persistent_v(int64_t l) const { return persistent_k(l) + persistent_block_; }
  const T* ring_k(int64_t l) const { return ring_block_ ? persistent_v(l) + persistent_block_ : nullptr; }
  const T* ring_v(int64_t l) const { return ring_block_ ? ring_k(l) + ring_block_ : nullptr; }

  int64_t persistent_length(int64_t b) const { return persistent_len_[b]; }
  int64_t ring_length(int64_t b) const { return ring_len_[b]; }
  const int64_t* persistent_lengths() const { return persistent_len_.data(); }  // [B]
  const int64_t* ring_lengths() const { return ring_len_.data(); }              // [B]
  // The ring row the next push fills: the oldest once the ring is full.
  int64_t ring_slot(int64_t b) const;

  // Copies one slot's K and V (rows of H·D in the same memory, head h at [h·D, (h+1)·D)) into
  // persistent row
  // `row` / ring row `row` of sequence b in layer l.
  void write_persistent(int64_t l, int64_t b, int64_t row, const T* k, const T* v);
  void write_ring(int64_t l, int64_t b, int64_t row, const T* k, const T* v);

  // Counts the rows a step wrote for sequence b: one persistent row, and one ring push when
  // there is a ring (the ring keeps its newest ring_capacity pushes).
  void advance(int64_t b);
  // Sets the counts directly after a prefill wrote rows [0, persistent) and pushed `pushed`
  // windowed rows in order into ring rows 0, 1, … (pushed <= ring_capacity).
  void set_lengths(int64_t b, int64_t persistent, int64_t pushed);
  // Makes sequence b a copy of sequence `from` of `source` (same layers, heads, head size;
  // capacities may differ): its persistent rows and its ring's rows, oldest first, so one
  // prefilled prompt can be continued in several sequences. The rows in use must fit.
  void copy_sequence(int64_t b, const KvCache& source, int64_t from);
  // Forgets sequence b's document (the step after a consumed EOS).
  void clear(int64_t b);
  void clear_all();

  int64_t allocated_bytes() const { return int64_t(data_.size() * sizeof(T)); }
  // Bytes of the rows in use, all layers, in sequences [0, sequences) (-1: all of them).
  int64_t used_bytes(int64_t sequences = -1) const;

 private:
  KvCacheShape shape_;
  ops::DeviceBuffer<T> data_;
  int64_t persistent_block_ = 0, ring_block_ = 0, layer_stride_ = 0;
  std::vector<int64_t> persistent_len_, ring_len_, ring_pushed_;
};

}  // namespace sps
