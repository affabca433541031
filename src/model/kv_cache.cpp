#include "model/kv_cache.h"

#include <algorithm>

#include "ops/backend_registry.h"
#include "util/error.h"

namespace sps {

KvType parse_kv_type(const std::string& name, const std::string& what) {
  if (name == "f32") return KvType::f32;
  if (name == "bf16") return KvType::bf16;
  fail("{}: '{}' is not a KV cache type; expected f32 or bf16", what, name);
}

const char* kv_type_name(KvType type) { return type == KvType::bf16 ? "bf16" : "f32"; }

void require_kv_type(KvType type, const ops::Device& device) {
  if (type != KvType::f32 && !ops::capabilities(device).bf16_kv_cache)
    fail("--kv-type {}: the {} backend keeps an f32 KV cache", kv_type_name(type), device.name());
}

template <typename T>
void KvCache<T>::allocate(const KvCacheShape& shape) {
  SPS_ASSERT(shape.layers > 0 && shape.batch > 0 && shape.heads > 0 && shape.head_dim > 0);
  SPS_ASSERT(shape.persistent_capacity > 0 && shape.ring_capacity >= 0);
  shape_ = shape;
  const int64_t row = shape.heads * shape.head_dim;
  persistent_block_ = shape.batch * shape.persistent_capacity * row;
  ring_block_ = shape.batch * shape.ring_capacity * row;
  layer_stride_ = 2 * (persistent_block_ + ring_block_);
  const size_t elements = size_t(shape.layers * layer_stride_);
  data_.reset(shape.type == KvType::f32 ? elements : 0);
  bf16_data_.reset(shape.type == KvType::bf16 ? elements : 0);
  persistent_len_.assign(shape.batch, 0);
  ring_len_.assign(shape.batch, 0);
  ring_pushed_.assign(shape.batch, 0);
  clear_writes();
}

template <typename T>
int64_t KvCache<T>::ring_slot(int64_t b) const {
  SPS_ASSERT(shape_.ring_capacity > 0);
  return ring_pushed_[b] % shape_.ring_capacity;
}

template <typename T>
void KvCache<T>::clear_writes() {
  plan_to_.clear();
  plan_from_.clear();
  plan_uploaded_ = false;
}

template <typename T>
void KvCache<T>::plan_write(int64_t block, int64_t v_block, int64_t capacity, int64_t b,
                            int64_t row, int64_t slot) {
  const int64_t H = shape_.heads, D = shape_.head_dim;
  for (int64_t h = 0; h < H; ++h)
    for (const int64_t kv : {0, 1}) {
      plan_to_.push_back(block + kv * v_block + ((b * H + h) * capacity + row) * D);
      plan_from_.push_back((slot * 3 + 1 + kv) * H * D + h * D);
    }
  plan_uploaded_ = false;
}

template <typename T>
void KvCache<T>::plan_persistent_write(int64_t b, int64_t row, int64_t slot) {
  SPS_ASSERT(0 <= b && b < shape_.batch && 0 <= row && row < shape_.persistent_capacity);
  plan_write(0, persistent_block_, shape_.persistent_capacity, b, row, slot);
}

template <typename T>
void KvCache<T>::plan_ring_write(int64_t b, int64_t row, int64_t slot) {
  SPS_ASSERT(0 <= b && b < shape_.batch && 0 <= row && row < shape_.ring_capacity);
  plan_write(2 * persistent_block_, ring_block_, shape_.ring_capacity, b, row, slot);
}

template <typename T>
void KvCache<T>::write_layer(int64_t l, const T* qkv) {
  const int64_t n = int64_t(plan_to_.size());
  if (n == 0) return;
  if (!plan_uploaded_) {
    plan_packed_.assign(plan_to_.begin(), plan_to_.end());
    plan_packed_.insert(plan_packed_.end(), plan_from_.begin(), plan_from_.end());
    plan_.upload(plan_packed_.data(), plan_packed_.size());
    plan_uploaded_ = true;
  }
  const int64_t* to = plan_.data();
  if (shape_.type == KvType::bf16)
    backend_.copy_rows_to_bf16(bf16_layer(l).persistent_k, qkv, to, to + n, n, shape_.head_dim);
  else
    backend_.copy_rows(layer(l).persistent_k, qkv, to, to + n, n, shape_.head_dim);
}

template <typename T>
void KvCache<T>::advance(int64_t b) {
  SPS_ASSERT(persistent_len_[b] < shape_.persistent_capacity);
  ++persistent_len_[b];
  if (shape_.ring_capacity > 0) {
    ++ring_pushed_[b];
    ring_len_[b] = std::min(ring_pushed_[b], shape_.ring_capacity);
  }
}

template <typename T>
void KvCache<T>::set_lengths(int64_t b, int64_t persistent, int64_t pushed) {
  SPS_ASSERT(0 <= persistent && persistent <= shape_.persistent_capacity);
  SPS_ASSERT(0 <= pushed && pushed <= shape_.ring_capacity);
  persistent_len_[b] = persistent;
  ring_pushed_[b] = pushed;
  ring_len_[b] = pushed;
}

template <typename T>
void KvCache<T>::copy_sequence(int64_t b, const KvCache& source, int64_t from) {
  const KvCacheShape& s = source.shape_;
  SPS_ASSERT(s.layers == shape_.layers && s.heads == shape_.heads && s.head_dim == shape_.head_dim);
  SPS_ASSERT(s.type == shape_.type);
  SPS_ASSERT(&source != this || b != from);
  const int64_t persistent = source.persistent_len_[from], ring = source.ring_len_[from];
  SPS_ASSERT(persistent <= shape_.persistent_capacity && ring <= shape_.ring_capacity);
  const int64_t H = shape_.heads, D = shape_.head_dim;
  // The source ring's oldest kept push sits at (pushed − length) mod capacity; its rows go
  // oldest first, from `oldest` to the end and then from row 0.
  const int64_t oldest = ring > 0 ? (source.ring_pushed_[from] - ring) % s.ring_capacity : 0;
  const int64_t tail = std::min(ring, s.ring_capacity - oldest);
  // Runs of rows of one (layer, K or V, head), each contiguous in both caches: the persistent
  // rows, then the ring's two pieces. One copy_rows per run length (the runs of a piece are
  // equally long), with element offsets from the start of each cache.
  struct Piece {
    int64_t rows, to_row, from_row;
    bool ring;
  };
  const Piece pieces[] = {
      {persistent, 0, 0, false}, {tail, 0, oldest, true}, {ring - tail, tail, 0, true}};
  struct Call {
    int64_t first, rows, width;  // where its offsets start in `offsets`, rows, elements a row
  };
  std::vector<int64_t> offsets;
  std::vector<Call> calls;
  for (const Piece& p : pieces) {
    if (p.rows == 0) continue;
    const int64_t to_cap = p.ring ? shape_.ring_capacity : shape_.persistent_capacity;
    const int64_t from_cap = p.ring ? s.ring_capacity : s.persistent_capacity;
    std::vector<int64_t> to, from_rows;
    for (int64_t l = 0; l < shape_.layers; ++l)
      for (const int64_t kv : {0, 1})
        for (int64_t h = 0; h < H; ++h) {
          const int64_t to_block =
              p.ring ? 2 * persistent_block_ + kv * ring_block_ : kv * persistent_block_;
          const int64_t from_block = p.ring ? 2 * source.persistent_block_ + kv * source.ring_block_
                                            : kv * source.persistent_block_;
          to.push_back(l * layer_stride_ + to_block + ((b * H + h) * to_cap + p.to_row) * D);
          from_rows.push_back(l * source.layer_stride_ + from_block +
                              ((from * H + h) * from_cap + p.from_row) * D);
        }
    calls.push_back({int64_t(offsets.size()), int64_t(to.size()), p.rows * D});
    offsets.insert(offsets.end(), to.begin(), to.end());
    offsets.insert(offsets.end(), from_rows.begin(), from_rows.end());
  }
  if (!offsets.empty()) copy_offsets_.upload(offsets.data(), offsets.size());
  for (const Call& c : calls) {
    const int64_t* to = copy_offsets_.data() + c.first;
    if (shape_.type == KvType::bf16)
      backend_.copy_bf16_rows(bf16_data_.data(), source.bf16_data_.data(), to, to + c.rows, c.rows,
                              c.width);
    else
      backend_.copy_rows(data_.data(), source.data_.data(), to, to + c.rows, c.rows, c.width);
  }
  set_lengths(b, persistent, ring);
}

template <typename T>
void KvCache<T>::clear(int64_t b) {
  persistent_len_[b] = ring_len_[b] = ring_pushed_[b] = 0;
}

template <typename T>
void KvCache<T>::clear_all() {
  for (int64_t b = 0; b < shape_.batch; ++b) clear(b);
}

template <typename T>
int64_t KvCache<T>::used_bytes(int64_t sequences) const {
  SPS_ASSERT(sequences <= shape_.batch);
  int64_t rows = 0;
  for (int64_t b = 0; b < (sequences < 0 ? shape_.batch : sequences); ++b)
    rows += persistent_len_[b] + ring_len_[b];
  return rows * 2 * shape_.layers * shape_.heads * shape_.head_dim * element_bytes();
}

template class KvCache<float>;
template class KvCache<double>;

}  // namespace sps
