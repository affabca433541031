#include "model/slot_layout.h"

namespace sps {

void build_slot_layout(SlotLayout& L, const int32_t* x, int64_t B, int64_t T,
                       const ModelConfig& c, const Family& family) {
  L.batch = B;
  L.tokens = T;
  L.streams = family.streams();
  const int64_t S = L.slots();
  L.slot_tokens.resize(B * S);
  L.positions.resize(B * T);
  L.doc.resize(B * T);
  L.doc_start.resize(B * T);
  L.keep.resize(B * T);
  L.kept = 0;
  for (int64_t b = 0; b < B; ++b) {
    const int32_t* xb = x + b * T;
    int64_t leading_pads = 0;
    while (leading_pads < T && xb[leading_pads] == c.pad_token_id) ++leading_pads;
    int32_t doc = 0;
    int32_t start = int32_t(leading_pads);
    for (int64_t i = 0; i < T; ++i) {
      const int64_t k = b * T + i;
      const bool pad = xb[i] == c.pad_token_id;
      L.positions[k] = i < leading_pads ? 0 : int32_t(i - leading_pads);
      L.doc[k] = pad ? -1 - int32_t(i) : doc;
      L.doc_start[k] = pad ? int32_t(i) : start;
      L.keep[k] = !pad && xb[i] != c.eos_token_id;
      L.kept += L.keep[k];
      if (xb[i] == c.eos_token_id) {  // the EOS ends its document; the next token starts one
        ++doc;
        start = int32_t(i + 1);
      }
      L.slot_tokens[b * S + i] = xb[i];
      if (L.streams == 2) L.slot_tokens[b * S + T + i] = c.predict_token_id;
    }
  }
}

}  // namespace sps
