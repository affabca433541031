#include "analysis/slot_gradient_norms.h"

#include <algorithm>
#include <cmath>

namespace sps::analysis {

namespace {

template <typename T>
double squared_norm(const T* v, int64_t n) {
  double s = 0;
  for (int64_t j = 0; j < n; ++j) s += double(v[j]) * double(v[j]);
  return s;
}

}  // namespace

template <typename T>
SlotGradientNorms<T>::SlotGradientNorms(const Model<T>& model, int64_t batch, int64_t tokens)
    : tokens_(tokens),
      streams_(model.family().streams()),
      readout_stream_(model.family().readout_stream()),
      block_squared_(size_t(batch * model.family().streams() * tokens), 0.0),
      readout_squared_(block_squared_.size(), 0.0) {}

template <typename T>
void SlotGradientNorms<T>::clear() {
  std::fill(block_squared_.begin(), block_squared_.end(), 0.0);
  std::fill(readout_squared_.begin(), readout_squared_.end(), 0.0);
}

template <typename T>
double SlotGradientNorms<T>::slot_norm(int64_t slot) const {
  return std::sqrt(squared(slot));
}

template <typename T>
double SlotGradientNorms<T>::slot_norm_without_readout(int64_t slot) const {
  return std::sqrt(block_squared_[size_t(slot)]);
}

template <typename T>
int64_t SlotGradientNorms<T>::slot_of_row(int64_t row, bool readout) const {
  if (!readout) return row;
  return slot(row / tokens_, readout_stream_, row % tokens_);
}

template <typename T>
void SlotGradientNorms<T>::linear(int64_t, const T* in, const T* dout, int64_t first_row,
                                  int64_t rows, int64_t in_dim, int64_t out_dim, bool readout) {
  std::vector<double>& sums = readout ? readout_squared_ : block_squared_;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r)
    sums[size_t(slot_of_row(first_row + r, readout))] +=
        squared_norm(dout + r * out_dim, out_dim) * squared_norm(in + r * in_dim, in_dim);
}

template <typename T>
void SlotGradientNorms<T>::norm(int64_t, const T* x, const T* rstd, const T* dout,
                                int64_t first_row, int64_t rows, int64_t dim, bool readout) {
  std::vector<double>& sums = readout ? readout_squared_ : block_squared_;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t j = 0; j < dim; ++j) {
      const double g = double(dout[r * dim + j]) * double(x[r * dim + j]) * double(rstd[r]);
      s += g * g;
    }
    sums[size_t(slot_of_row(first_row + r, readout))] += s;
  }
}

template <typename T>
void SlotGradientNorms<T>::embedding(int64_t, const int32_t*, const T* dout, int64_t rows,
                                     int64_t dim) {
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) block_squared_[size_t(r)] += squared_norm(dout + r * dim, dim);
}

template class SlotGradientNorms<float>;
template class SlotGradientNorms<double>;

}  // namespace sps::analysis
