#include "model/kv_cache.h"

#include <algorithm>
#include <array>

#include "util/error.h"

namespace sps {

template <typename T>
void KvCache<T>::allocate(const KvCacheShape& shape) {
  SPS_ASSERT(shape.layers > 0 && shape.batch > 0 && shape.heads > 0 && shape.head_dim > 0);
  SPS_ASSERT(shape.persistent_capacity > 0 && shape.ring_capacity >= 0);
  shape_ = shape;
  const int64_t row = shape.heads * shape.head_dim;
  persistent_block_ = shape.batch * shape.persistent_capacity * row;
  ring_block_ = shape.batch * shape.ring_capacity * row;
  layer_stride_ = 2 * (persistent_block_ + ring_block_);
  data_.reset(size_t(shape.layers * layer_stride_));
  persistent_len_.assign(shape.batch, 0);
  ring_len_.assign(shape.batch, 0);
  ring_pushed_.assign(shape.batch, 0);
}

template <typename T>
int64_t KvCache<T>::ring_slot(int64_t b) const {
  SPS_ASSERT(shape_.ring_capacity > 0);
  return ring_pushed_[b] % shape_.ring_capacity;
}

namespace {
// Scatters a [H·D] row into row `row` of each head's [capacity, D] block.
template <typename T>
void scatter_row(const ops::Memory& memory, T* blocks, int64_t b, int64_t row, int64_t capacity,
                 int64_t H, int64_t D, const T* src) {
  for (int64_t h = 0; h < H; ++h)
    memory.copy(blocks + ((b * H + h) * capacity + row) * D, src + h * D, sizeof(T) * D);
}
}  // namespace

template <typename T>
void KvCache<T>::write_persistent(int64_t l, int64_t b, int64_t row, const T* k, const T* v) {
  SPS_ASSERT(0 <= row && row < shape_.persistent_capacity);
  const int64_t C = shape_.persistent_capacity, H = shape_.heads, D = shape_.head_dim;
  scatter_row(data_.memory(), persistent_k(l), b, row, C, H, D, k);
  scatter_row(data_.memory(), persistent_v(l), b, row, C, H, D, v);
}

template <typename T>
void KvCache<T>::write_ring(int64_t l, int64_t b, int64_t row, const T* k, const T* v) {
  SPS_ASSERT(0 <= row && row < shape_.ring_capacity);
  const int64_t C = shape_.ring_capacity, H = shape_.heads, D = shape_.head_dim;
  scatter_row(data_.memory(), ring_k(l), b, row, C, H, D, k);
  scatter_row(data_.memory(), ring_v(l), b, row, C, H, D, v);
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
  const int64_t persistent = source.persistent_len_[from], ring = source.ring_len_[from];
  SPS_ASSERT(persistent <= shape_.persistent_capacity && ring <= shape_.ring_capacity);
  const int64_t H = shape_.heads, D = shape_.head_dim;
  // The source ring's oldest kept push sits at (pushed − length) mod capacity.
  const int64_t oldest = ring > 0 ? (source.ring_pushed_[from] - ring) % s.ring_capacity : 0;
  for (int64_t l = 0; l < shape_.layers; ++l)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t src_head = from * H + h, dst_head = b * H + h;
      // n rows from source row src_row0 of the head to row dst_row0 of this head.
      const auto copy_rows = [&](T* dst, const T* src, int64_t dst_cap, int64_t src_cap,
                                 int64_t dst_row0, int64_t src_row0, int64_t n) {
        data_.memory().copy(dst + (dst_head * dst_cap + dst_row0) * D,
                            src + (src_head * src_cap + src_row0) * D, sizeof(T) * n * D);
      };
      copy_rows(persistent_k(l), source.persistent_k(l), shape_.persistent_capacity,
                s.persistent_capacity, 0, 0, persistent);
      copy_rows(persistent_v(l), source.persistent_v(l), shape_.persistent_capacity,
                s.persistent_capacity, 0, 0, persistent);
      // The ring's rows oldest first: from `oldest` to the end, then from row 0.
      const int64_t tail = std::min(ring, s.ring_capacity - oldest);
      for (const auto& [dst_row0, src_row0, n] :
           {std::array<int64_t, 3>{0, oldest, tail}, std::array<int64_t, 3>{tail, 0, ring - tail}}) {
        if (n == 0) continue;
        copy_rows(ring_k(l), source.ring_k(l), shape_.ring_capacity, s.ring_capacity, dst_row0, src_row0, n);
        copy_rows(ring_v(l), source.ring_v(l), shape_.ring_capacity, s.ring_capacity, dst_row0, src_row0, n);
      }
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
  return rows * 2 * shape_.layers * shape_.heads * shape_.head_dim * int64_t(sizeof(T));
}

template class KvCache<float>;
template class KvCache<double>;

}  // namespace sps
