// Naive double-precision reference of the SPS model (see naive_model.h). Everything here
// is written from docs/model.md directly; nothing from src/ops or src/model is used.
#include "naive_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace sps::testing {
namespace {

enum SlotKind { kInput = 0, kPredict = 1 };

struct NaiveSlot {
  int64_t token_index;  // i
  int kind;             // kInput or kPredict (standard: always kInput)
  int32_t token;        // x_i or PREDICT
  int64_t position;     // RoPE position
  int64_t doc;          // document id
};

const std::vector<double>& get(const NamedWeights& w, const std::string& name, size_t n) {
  auto it = w.find(name);
  if (it == w.end()) throw std::runtime_error("naive model: missing weight " + name);
  if (it->second.size() != n)
    throw std::runtime_error("naive model: weight " + name + " has " +
                             std::to_string(it->second.size()) + " values, expected " +
                             std::to_string(n));
  return it->second;
}

// y[r] = Σ_c W[r, c] x[c] for a row-major [rows, cols] matrix.
std::vector<double> matvec(const std::vector<double>& W, int64_t rows, int64_t cols,
                           const std::vector<double>& x) {
  std::vector<double> y(rows, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0.0;
    for (int64_t c = 0; c < cols; ++c) s += W[r * cols + c] * x[c];
    y[r] = s;
  }
  return y;
}

std::vector<double> rmsnorm(const std::vector<double>& x, const std::vector<double>& g,
                            double eps) {
  double ms = 0.0;
  for (double v : x) ms += v * v;
  ms /= static_cast<double>(x.size());
  double r = 1.0 / std::sqrt(ms + eps);
  std::vector<double> y(x.size());
  for (size_t k = 0; k < x.size(); ++k) y[k] = x[k] * r * g[k];
  return y;
}

// RoPE on one head vector of size D, adjacent pairs (x_{2j}, x_{2j+1}), f_j = θ^(−2j/D).
void rope(double* v, int64_t D, int64_t pos, double theta) {
  for (int64_t j = 0; j < D / 2; ++j) {
    double f = std::pow(theta, -2.0 * static_cast<double>(j) / static_cast<double>(D));
    double angle = static_cast<double>(pos) * f;
    double c = std::cos(angle), s = std::sin(angle);
    double a = v[2 * j], b = v[2 * j + 1];
    v[2 * j] = a * c - b * s;
    v[2 * j + 1] = a * s + b * c;
  }
}

double silu(double z) { return z / (1.0 + std::exp(-z)); }

// The family's three choices (docs/model.md §3).
struct NaiveFamily {
  bool interleaved = false;
  int persistent = kInput;  // which slot kind is persistent
  int readout = kInput;     // which slot kind the logits are read at
};

NaiveFamily family_of(const std::string& name) {
  NaiveFamily f;
  if (name == "standard") {
    f.interleaved = false;
    f.persistent = kInput;
    f.readout = kInput;
  } else if (name == "sps") {
    f.interleaved = true;
    f.persistent = kInput;
    f.readout = kPredict;
  } else if (name == "reverse_sps") {
    f.interleaved = true;
    f.persistent = kPredict;
    f.readout = kInput;
  } else if (name == "delayed_state") {
    f.interleaved = true;
    f.persistent = kPredict;
    f.readout = kPredict;
  } else {
    throw std::runtime_error("naive model: unknown family " + name);
  }
  return f;
}

// One row: slots in flat interleaved order, positions and documents per docs/model.md §3–§4.
std::vector<NaiveSlot> build_slots(const ModelConfig& cfg, const NaiveFamily& fam, const int32_t* x,
                              int64_t T) {
  // Positions: counted from 0 at the first real (non-PAD) token. Leading PADs get 0.
  int64_t first_real = T;
  for (int64_t i = 0; i < T; ++i)
    if (x[i] != cfg.pad_token_id) {
      first_real = i;
      break;
    }
  // Documents: each PAD is its own document (ids below any real document); a real token's
  // document is the number of EOS among the real tokens before it.
  std::vector<int64_t> doc(T), pos(T);
  int64_t eos_seen = 0;
  for (int64_t i = 0; i < T; ++i) {
    if (x[i] == cfg.pad_token_id) {
      doc[i] = -1 - i;
    } else {
      doc[i] = eos_seen;
      if (x[i] == cfg.eos_token_id) ++eos_seen;
    }
    pos[i] = i >= first_real ? i - first_real : 0;
  }
  std::vector<NaiveSlot> slots;
  for (int64_t i = 0; i < T; ++i) {
    slots.push_back({i, kInput, x[i], pos[i], doc[i]});
    if (fam.interleaved) slots.push_back({i, kPredict, cfg.predict_token_id, pos[i], doc[i]});
  }
  return slots;
}

// docs/model.md §4, written out literally.
bool visible(const ModelConfig& cfg, const NaiveFamily& fam, const NaiveSlot& q, const NaiveSlot& k) {
  int64_t i = q.token_index, j = k.token_index;
  int a = q.kind, b = k.kind;
  bool causal = j < i || (j == i && b <= a);
  if (!causal) return false;
  if (q.doc != k.doc) return false;
  bool persistent_key = !fam.interleaved || b == fam.persistent;
  if (!persistent_key && !(i - j <= cfg.window_size)) return false;
  if (persistent_key && cfg.persistent_key_window >= 0 && !(i - j <= cfg.persistent_key_window))
    return false;
  return true;
}

}  // namespace

NaiveOutput naive_forward(const ModelConfig& cfg, const NamedWeights& w,
                          const std::vector<int32_t>& x, const std::vector<int32_t>& y,
                          int64_t B, int64_t T) {
  const NaiveFamily fam = family_of(cfg.family);
  const int64_t d = cfg.hidden_size, H = cfg.n_head, D = d / H, F = cfg.intermediate_size,
                V = cfg.vocab_size, L = cfg.n_layer;
  if (static_cast<int64_t>(x.size()) != B * T || static_cast<int64_t>(y.size()) != B * T)
    throw std::runtime_error("naive model: x and y must hold B*T tokens");

  const auto& E = get(w, "transformer.wte.weight", V * d);
  const auto& gout = get(w, "transformer.output_norm.weight", d);

  NaiveOutput out;
  out.logits.assign(B * T * V, 0.0);
  out.nll.assign(B * T, 0.0);
  out.keep.assign(B * T, 0);
  double nll_sum = 0.0;
  int64_t kept = 0;

  for (int64_t bi = 0; bi < B; ++bi) {
    const int32_t* xr = x.data() + bi * T;
    std::vector<NaiveSlot> slots = build_slots(cfg, fam, xr, T);
    const int64_t n = static_cast<int64_t>(slots.size());

    std::vector<std::vector<bool>> vis(n, std::vector<bool>(n, false));
    for (int64_t s = 0; s < n; ++s)
      for (int64_t t = 0; t < n; ++t) vis[s][t] = visible(cfg, fam, slots[s], slots[t]);

    // Embedding.
    std::vector<std::vector<double>> h(n, std::vector<double>(d));
    for (int64_t s = 0; s < n; ++s) {
      int32_t tok = slots[s].token;
      if (tok < 0 || tok >= V) throw std::runtime_error("naive model: token out of range");
      for (int64_t c = 0; c < d; ++c) h[s][c] = E[tok * d + c];
    }

    for (int64_t l = 0; l < L; ++l) {
      const std::string p = "transformer.h." + std::to_string(l) + ".";
      const auto& g_attn = get(w, p + "attention_norm.weight", d);
      const auto& W_attn = get(w, p + "attn.c_attn.weight", 3 * d * d);
      const auto& W_proj = get(w, p + "attn.c_proj.weight", d * d);
      const auto& g_mlp = get(w, p + "mlp_norm.weight", d);
      const auto& W_gate = get(w, p + "mlp.gate_proj.weight", F * d);
      const auto& W_up = get(w, p + "mlp.up_proj.weight", F * d);
      const auto& W_down = get(w, p + "mlp.down_proj.weight", d * F);

      // Attention.
      std::vector<std::vector<double>> q(n), k(n), v(n);
      for (int64_t s = 0; s < n; ++s) {
        std::vector<double> qkv = matvec(W_attn, 3 * d, d, rmsnorm(h[s], g_attn, cfg.norm_eps));
        q[s].assign(qkv.begin(), qkv.begin() + d);
        k[s].assign(qkv.begin() + d, qkv.begin() + 2 * d);
        v[s].assign(qkv.begin() + 2 * d, qkv.end());
        for (int64_t hh = 0; hh < H; ++hh) {
          rope(q[s].data() + hh * D, D, slots[s].position, cfg.rope_theta);
          rope(k[s].data() + hh * D, D, slots[s].position, cfg.rope_theta);
        }
      }
      const double scale = 1.0 / std::sqrt(static_cast<double>(D));
      std::vector<std::vector<double>> attn(n, std::vector<double>(d, 0.0));
      for (int64_t s = 0; s < n; ++s) {
        for (int64_t hh = 0; hh < H; ++hh) {
          std::vector<double> score(n, -std::numeric_limits<double>::infinity());
          double mx = -std::numeric_limits<double>::infinity();
          for (int64_t t = 0; t < n; ++t) {
            if (!vis[s][t]) continue;
            double dot = 0.0;
            for (int64_t e = 0; e < D; ++e) dot += q[s][hh * D + e] * k[t][hh * D + e];
            score[t] = dot * scale;
            if (score[t] > mx) mx = score[t];
          }
          double z = 0.0;
          for (int64_t t = 0; t < n; ++t)
            if (vis[s][t]) z += std::exp(score[t] - mx);
          for (int64_t t = 0; t < n; ++t) {
            if (!vis[s][t]) continue;
            double pr = std::exp(score[t] - mx) / z;
            for (int64_t e = 0; e < D; ++e) attn[s][hh * D + e] += pr * v[t][hh * D + e];
          }
        }
      }
      for (int64_t s = 0; s < n; ++s) {
        std::vector<double> o = matvec(W_proj, d, d, attn[s]);
        for (int64_t c = 0; c < d; ++c) h[s][c] += o[c];
      }

      // MLP (SwiGLU).
      for (int64_t s = 0; s < n; ++s) {
        std::vector<double> xn = rmsnorm(h[s], g_mlp, cfg.norm_eps);
        std::vector<double> gate = matvec(W_gate, F, d, xn);
        std::vector<double> up = matvec(W_up, F, d, xn);
        std::vector<double> act(F);
        for (int64_t f = 0; f < F; ++f) act[f] = silu(gate[f]) * up[f];
        std::vector<double> o = matvec(W_down, d, F, act);
        for (int64_t c = 0; c < d; ++c) h[s][c] += o[c];
      }
    }

    // Readout: logits of pair i at the family's readout slot, tied head.
    for (int64_t s = 0; s < n; ++s) {
      if (slots[s].kind != fam.readout) continue;
      const int64_t i = slots[s].token_index;
      std::vector<double> hn = rmsnorm(h[s], gout, cfg.norm_eps);
      double* lg = out.logits.data() + (bi * T + i) * V;
      for (int64_t vv = 0; vv < V; ++vv) {
        double dot = 0.0;
        for (int64_t c = 0; c < d; ++c) dot += hn[c] * E[vv * d + c];
        lg[vv] = dot;
      }
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t vv = 0; vv < V; ++vv) mx = std::max(mx, lg[vv]);
      double z = 0.0;
      for (int64_t vv = 0; vv < V; ++vv) z += std::exp(lg[vv] - mx);
      const double lse = mx + std::log(z);
      const int32_t target = y[bi * T + i];
      out.nll[bi * T + i] = (target >= 0 && target < V)
                                ? lse - lg[target]
                                : std::numeric_limits<double>::quiet_NaN();
      const int32_t tok = xr[i];
      const int keep = (tok != cfg.eos_token_id && tok != cfg.pad_token_id) ? 1 : 0;
      out.keep[bi * T + i] = keep;
      if (keep) {
        nll_sum += out.nll[bi * T + i];
        ++kept;
      }
    }
  }
  out.loss = kept > 0 ? nll_sum / static_cast<double>(kept) : 0.0;
  return out;
}

std::vector<RollingWindow> naive_rolling_windows(const std::vector<int32_t>& doc,
                                                 int64_t context, int32_t eos) {
  const int64_t n = static_cast<int64_t>(doc.size());
  std::vector<RollingWindow> windows;
  if (n == 0) return windows;
  // First window: predicts [0, e) from [EOS] + doc[0, e−1).
  {
    RollingWindow win;
    win.start = 0;
    win.end = std::min(context, n);
    win.inputs.push_back(eos);
    for (int64_t t = 0; t + 1 < win.end; ++t) win.inputs.push_back(doc[t]);
    for (int64_t t = 0; t < win.end; ++t) win.targets.push_back(doc[t]);
    windows.push_back(win);
  }
  // Later windows: predict [s, e) with e − s ≤ context, reading the `context` inputs that
  // end just before e: doc[e − 1 − context, e − 1).
  while (windows.back().end < n) {
    RollingWindow win;
    win.start = windows.back().end;
    win.end = std::min(win.start + context, n);
    for (int64_t t = win.end - 1 - context; t < win.end - 1; ++t) win.inputs.push_back(doc[t]);
    for (int64_t t = win.end - context; t < win.end; ++t) win.targets.push_back(doc[t]);
    windows.push_back(win);
  }
  return windows;
}

double naive_rolling_loglik(const ModelConfig& cfg, const NamedWeights& w,
                            const std::vector<int32_t>& doc, int64_t context) {
  double total = 0.0;
  for (const RollingWindow& win : naive_rolling_windows(doc, context, cfg.eos_token_id)) {
    const int64_t T = static_cast<int64_t>(win.inputs.size());
    NaiveOutput o = naive_forward(cfg, w, win.inputs, win.targets, 1, T);
    // The scored tokens are the last end − start positions of the window (every one is
    // counted, including the first token predicted from the leading EOS).
    for (int64_t t = T - (win.end - win.start); t < T; ++t) total -= o.nll[t];
  }
  return total;
}

}  // namespace sps::testing
