#pragma once
// The newest rows of a ring buffer (the windowed part of the decode cache, ops.h) as two
// contiguous runs of storage rows, so a kernel walks them with plain strides and no modulo.
#include <algorithm>
#include <cstdint>

namespace sps::ops::cpu {

// Storage rows [first, first + count).
struct RowRun {
  int64_t first = 0, count = 0;
};

// The newest n rows of a ring of `capacity` rows whose next write goes to row `next`
// (0 ≤ n ≤ capacity, 0 ≤ next ≤ capacity): `below` is the part of them just below `next`,
// `wrapped` the older rest at the top of the ring. Either may be empty.
struct RingSplit {
  RowRun below;    // [max(0, next − n), next)
  RowRun wrapped;  // [capacity − wrapped.count, capacity)
};

inline RingSplit split_ring(int64_t next, int64_t n, int64_t capacity) {
  const int64_t low = std::max<int64_t>(0, next - n);
  const int64_t wrapped = n - (next - low);
  return {{low, next - low}, {capacity - wrapped, wrapped}};
}

// How many pushes ago ring row `row` was written: 0 for the newest, row next − 1.
inline int64_t ring_age(int64_t row, int64_t next, int64_t capacity) {
  return (next - 1 - row + capacity) % capacity;
}

}  // namespace sps::ops::cpu
