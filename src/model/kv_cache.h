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
// lengths are host bookkeeping. Rows move by the backend's copy_rows, planned on the host: a
// forward's writes are one call per layer and a sequence's copy at most three calls, however
// many rows, heads and sequences they take (a GPU launches once where it would otherwise
// copy once per layer, row and head).
//
// The rows are T, or bf16 (KvType::bf16, --kv-type bf16: half the bytes a decode step reads
// from the cache): each K and V value rounded to the nearest bf16 (ties to even) as it is
// written, and widened exactly when the decode attention reads it (ops.h
// attention_decode_bf16_cache). The step's own keys and a prefill's attention stay T.
#include <cstdint>
#include <string>
#include <vector>

#include "ops/backend.h"
#include "util/error.h"

namespace sps {

enum class KvType { f32, bf16 };
// "f32" or "bf16"; anything else is a UserError naming `what`.
KvType parse_kv_type(const std::string& name, const std::string& what);
const char* kv_type_name(KvType type);
// A UserError (--kv-type) where `device`'s backend cannot hold a cache of `type`.
void require_kv_type(KvType type, const ops::Device& device);

struct KvCacheShape {
  KvType type = KvType::f32;
  int64_t layers = 0, batch = 0, heads = 0, head_dim = 0;
  int64_t persistent_capacity = 0;  // rows per sequence: the longest document it will hold
  int64_t ring_capacity = 0;        // windowed rows per sequence (0: no ring)
};

template <typename T>
class KvCache {
 public:
  explicit KvCache(const ops::Backend<T>& backend = ops::cpu_backend<T>())
      : backend_(backend),
        data_(backend),
        bf16_data_(backend),
        plan_(backend),
        copy_offsets_(backend) {}
  explicit KvCache(const KvCacheShape& shape,
                   const ops::Backend<T>& backend = ops::cpu_backend<T>())
      : KvCache(backend) {
    allocate(shape);
  }

  void allocate(const KvCacheShape& shape);
  const KvCacheShape& shape() const { return shape_; }

  // [B, H, persistent_capacity, D] and [B, H, ring_capacity, D] of layer l (the backend's
  // memory; no ring: null), in the cache's element type E: T (KvType::f32) or uint16_t
  // (KvType::bf16).
  template <typename E>
  struct LayerRows {
    E *persistent_k, *persistent_v, *ring_k, *ring_v;
  };
  LayerRows<T> layer(int64_t l) { return rows_of(data_.data(), KvType::f32, l); }
  LayerRows<const T> layer(int64_t l) const {
    return rows_of<const T>(data_.data(), KvType::f32, l);
  }
  LayerRows<uint16_t> bf16_layer(int64_t l) { return rows_of(bf16_data_.data(), KvType::bf16, l); }
  LayerRows<const uint16_t> bf16_layer(int64_t l) const {
    return rows_of<const uint16_t>(bf16_data_.data(), KvType::bf16, l);
  }

  int64_t persistent_length(int64_t b) const { return persistent_len_[b]; }
  int64_t ring_length(int64_t b) const { return ring_len_[b]; }
  const int64_t* persistent_lengths() const { return persistent_len_.data(); }  // [B]
  const int64_t* ring_lengths() const { return ring_len_.data(); }              // [B]
  // The ring row the next push fills: the oldest once the ring is full.
  int64_t ring_slot(int64_t b) const;

  // The rows a forward writes, the same in every layer. plan_persistent_write and
  // plan_ring_write say that slot `slot` of the forward's q | k | v rows ([slots, 3·H·D], head
  // h's K at columns H·D + h·D, V at 2·H·D + h·D) becomes persistent row / ring row `row` of
  // sequence b; write_layer(l, qkv) then copies every planned row of layer l's q | k | v into
  // layer l, in one backend call (the plan crosses to the backend's memory once, at its first
  // write). clear_writes starts a new plan; a plan names each row at most once.
  void clear_writes();
  void plan_persistent_write(int64_t b, int64_t row, int64_t slot);
  void plan_ring_write(int64_t b, int64_t row, int64_t slot);
  void write_layer(int64_t l, const T* qkv);

  // Counts the rows a step wrote for sequence b: one persistent row, and one ring push when
  // there is a ring (the ring keeps its newest ring_capacity pushes).
  void advance(int64_t b);
  // Sets the counts directly after a prefill wrote rows [0, persistent) and pushed `pushed`
  // windowed rows in order into ring rows 0, 1, … (pushed <= ring_capacity).
  void set_lengths(int64_t b, int64_t persistent, int64_t pushed);
  // Makes sequence b a copy of sequence `from` of `source` (same layers, heads, head size;
  // capacities may differ; `source` may be this cache, `from` another sequence): its
  // persistent rows and its ring's rows, oldest first, so one prefilled prompt can be
  // continued in several sequences. The rows in use must fit.
  void copy_sequence(int64_t b, const KvCache& source, int64_t from);
  // Forgets sequence b's document (the step after a consumed EOS).
  void clear(int64_t b);
  void clear_all();

  int64_t allocated_bytes() const {
    return int64_t(data_.size() * sizeof(T) + bf16_data_.size() * sizeof(uint16_t));
  }
  // Bytes of the rows in use, all layers, in sequences [0, sequences) (-1: all of them).
  int64_t used_bytes(int64_t sequences = -1) const;

 private:
  template <typename E>
  LayerRows<E> rows_of(E* data, KvType type, int64_t l) const {
    SPS_ASSERT(shape_.type == type && 0 <= l && l < shape_.layers);
    E* k = data + l * layer_stride_;
    E* ring = ring_block_ ? k + 2 * persistent_block_ : nullptr;
    return {k, k + persistent_block_, ring, ring ? ring + ring_block_ : nullptr};
  }
  int64_t element_bytes() const {
    return shape_.type == KvType::bf16 ? int64_t(sizeof(uint16_t)) : int64_t(sizeof(T));
  }

  // Plans the K and V rows of every head of one slot: from q | k | v row `slot` to row `row`
  // of sequence b in the blocks at `block` (persistent_k's or ring_k's offset in a layer;
  // V's block follows K's at `v_block`), `capacity` rows per (sequence, head).
  void plan_write(int64_t block, int64_t v_block, int64_t capacity, int64_t b, int64_t row,
                  int64_t slot);

  const ops::Backend<T>& backend_;
  KvCacheShape shape_;
  ops::DeviceBuffer<T> data_;              // the rows of an f32 cache
  ops::DeviceBuffer<uint16_t> bf16_data_;  // the rows of a bf16 cache
  int64_t persistent_block_ = 0, ring_block_ = 0, layer_stride_ = 0;
  std::vector<int64_t> persistent_len_, ring_len_, ring_pushed_;
  // The write plan: element offsets of each row into a layer (to) and into q | k | v (from),
  // on the host, and [to | from] (plan_packed_ on the host) in the backend's memory once
  // uploaded. The host vectors keep their capacity, so a step's plan allocates nothing.
  std::vector<int64_t> plan_to_, plan_from_, plan_packed_;
  ops::DeviceBuffer<int64_t> plan_;
  bool plan_uploaded_ = false;
  ops::DeviceBuffer<int64_t> copy_offsets_;  // copy_sequence's rows
};

}  // namespace sps
