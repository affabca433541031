#pragma once
// Per-slot parameter-gradient norms of one backward (docs/model.md §9 gradient routing). The weight
// gradient of a layer is a sum over slots, Σ_s dout_sᵀ·in_s; the part slot s contributes has
// Frobenius norm ‖dout_s‖·‖in_s‖ for a linear layer, ‖dout_s ⊙ x̂_s‖ for a norm gain
// (x̂ = x·rstd) and ‖dout_s‖ for the embedding. Each layer (and each use of the tied
// embedding: the LM head and the lookup) is one term; a slot's norm is √Σ terms².
// The readout terms (output norm, LM head) are also kept apart: at a slot they come from
// that slot's own loss only, so a norm without them shows what the blocks receive.
#include <cstdint>
#include <vector>

#include "model/model.h"

namespace sps::analysis {

template <typename T>
class SlotGradientNorms : public GradientObserver<T> {
 public:
  // For backwards over `batch` sequences of `tokens` tokens of `model`'s family.
  SlotGradientNorms(const Model<T>& model, int64_t batch, int64_t tokens);

  void clear();
  // Slot b·S + stream·T + t, S = streams·T.
  int64_t slot(int64_t b, int64_t stream, int64_t t) const { return (b * streams_ + stream) * tokens_ + t; }
  double squared(int64_t slot) const {
    return block_squared_[size_t(slot)] + readout_squared_[size_t(slot)];
  }
  double slot_norm(int64_t slot) const;
  // Without the output norm and LM head terms.
  double slot_norm_without_readout(int64_t slot) const;

  void linear(int64_t param, const T* in, const T* dout, int64_t first_row, int64_t rows,
              int64_t in_dim, int64_t out_dim, bool readout) override;
  void norm(int64_t param, const T* x, const T* rstd, const T* dout, int64_t first_row,
            int64_t rows, int64_t dim, bool readout) override;
  void embedding(int64_t param, const int32_t* tokens, const T* dout, int64_t rows,
                 int64_t dim) override;

 private:
  // Readout rows b·T + t sit at slot b·S + readout_stream·T + t.
  int64_t slot_of_row(int64_t row, bool readout) const;

  int64_t tokens_, streams_, readout_stream_;
  // [B·S] Σ over terms of the squared norm: the blocks' and embedding lookup's, the readout's.
  std::vector<double> block_squared_, readout_squared_;
};

}  // namespace sps::analysis
