#include "eval/rolling.h"

#include <algorithm>
#include <cmath>

#include "util/error.h"

namespace sps::eval {

std::vector<RollingWindow> rolling_windows(int64_t n, int64_t context) {
  SPS_ASSERT(context >= 1);
  std::vector<RollingWindow> windows;
  if (n <= 0) return windows;
  const int64_t first_end = std::min(context, n);
  windows.push_back({0, first_end, first_end});
  for (int64_t s = first_end; s < n; s += context)
    windows.push_back({s, std::min(s + context, n), context});
  return windows;
}

template <typename T>
std::vector<double> rolling_logliks(Model<T>& model, const std::vector<std::vector<int32_t>>& docs,
                                    int64_t context, int64_t batch,
                                    const ProgressCallback& progress) {
  const ModelConfig& cfg = model.config();
  if (context < 1 || context > cfg.block_size)
    fail("rolling context {} is outside [1, block_size = {}]", context, cfg.block_size);
  SPS_ASSERT(batch >= 1);
  struct Job {
    size_t doc;
    RollingWindow w;
  };
  std::vector<Job> jobs;
  for (size_t d = 0; d < docs.size(); ++d) {
    for (int32_t id : docs[d])
      if (id < 0 || id >= cfg.vocab_size)
        fail("token id {} is outside the model's vocabulary of {}", id, cfg.vocab_size);
    for (const auto& w : rolling_windows(int64_t(docs[d].size()), context)) jobs.push_back({d, w});
  }
  // Equal lengths together keeps padding to the few short first windows.
  std::stable_sort(jobs.begin(), jobs.end(),
                   [](const Job& a, const Job& b) { return a.w.length > b.w.length; });
  std::vector<double> result(docs.size(), 0.0);
  std::vector<int32_t> x, y;
  std::vector<double> nll;
  const int32_t eos = int32_t(cfg.eos_token_id), pad = int32_t(cfg.pad_token_id);
  for (size_t first = 0; first < jobs.size(); first += size_t(batch)) {
    const int64_t b = std::min<int64_t>(batch, int64_t(jobs.size() - first));
    const int64_t L = jobs[first].w.length;  // the longest of this batch (sorted)
    x.assign(size_t(b * L), pad);
    y.assign(size_t(b * L), pad);
    nll.assign(size_t(b * L), 0.0);
    for (int64_t r = 0; r < b; ++r) {
      const Job& job = jobs[first + size_t(r)];
      const auto& doc = docs[job.doc];
      const int64_t len = job.w.length, off = L - len;
      for (int64_t k = 0; k < len; ++k) {
        const int64_t in = job.w.end - 1 - len + k;
        x[size_t(r * L + off + k)] = in < 0 ? eos : doc[size_t(in)];
        y[size_t(r * L + off + k)] = doc[size_t(in + 1)];
      }
    }
    ForwardOptions options;
    options.nll = nll.data();
    model.forward(x.data(), y.data(), b, L, options);
    for (int64_t r = 0; r < b; ++r) {
      const Job& job = jobs[first + size_t(r)];
      double sum = 0;
      for (int64_t k = L - (job.w.end - job.w.start); k < L; ++k) sum += nll[size_t(r * L + k)];
      result[job.doc] -= sum;
    }
    if (progress) progress(int64_t(first) + b, int64_t(jobs.size()));
  }
  return result;
}

template std::vector<double> rolling_logliks<float>(Model<float>&,
                                                    const std::vector<std::vector<int32_t>>&,
                                                    int64_t, int64_t, const ProgressCallback&);
template std::vector<double> rolling_logliks<double>(Model<double>&,
                                                     const std::vector<std::vector<int32_t>>&,
                                                     int64_t, int64_t, const ProgressCallback&);

namespace {

// Python's str.isspace code points.
bool is_python_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

// Decodes one well-formed UTF-8 sequence at text[i]; ill-formed bytes come back as one
// non-space unit (0xFFFD).
uint32_t next_code_point(std::string_view text, size_t& i) {
  const auto b = [&](size_t k) { return uint8_t(text[k]); };
  const uint8_t c = b(i);
  int extra = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : -1;
  if (extra < 0) {
    ++i;
    return 0xFFFD;
  }
  uint32_t cp = extra == 0 ? c : extra == 1 ? (c & 0x1Fu) : extra == 2 ? (c & 0x0Fu) : (c & 0x07u);
  for (int k = 1; k <= extra; ++k) {
    if (i + size_t(k) >= text.size() || (b(i + size_t(k)) & 0xC0) != 0x80) {
      ++i;
      return 0xFFFD;
    }
    cp = (cp << 6) | (b(i + size_t(k)) & 0x3Fu);
  }
  i += size_t(extra) + 1;
  return cp;
}

}  // namespace

int64_t whitespace_words(std::string_view text) {
  int64_t runs = 0;
  bool in_space = false;
  for (size_t i = 0; i < text.size();) {
    const bool space = is_python_space(next_code_point(text, i));
    if (space && !in_space) ++runs;
    in_space = space;
  }
  return runs + 1;
}

double CorpusScore::bits_per_byte() const {
  return bytes > 0 ? -loglik / (double(bytes) * std::log(2.0)) : 0;
}

}  // namespace sps::eval
