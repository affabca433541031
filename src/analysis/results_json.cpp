#include "analysis/results_json.h"

#include <algorithm>

namespace sps::analysis {

nlohmann::ordered_json persistent_window_json(const PersistentWindowResult& r, int64_t bin_width) {
  nlohmann::ordered_json j;
  j["omega"] = r.omega;
  j["length"] = r.length;
  j["sequences"] = r.sequences;
  // Positions p ≤ ω see every key they saw without ω, so only p > ω can move.
  j["mean_delta_beyond_omega"] = r.mean_delta(r.omega + 1, r.length);
  j["mean_delta"] = r.mean_delta(0, r.length);
  j["baseline_nll_beyond_omega"] = r.mean_baseline(r.omega + 1, r.length);
  nlohmann::ordered_json bins = nlohmann::ordered_json::array();
  for (int64_t begin = 0; begin < r.length; begin += bin_width) {
    const int64_t end = std::min(begin + bin_width, r.length);
    int64_t terms = 0;
    for (int64_t p = begin; p < end; ++p) terms += r.count[size_t(p)];
    bins.push_back({{"begin", begin},
                    {"end", end},
                    {"mean_delta", r.mean_delta(begin, end)},
                    {"baseline_nll", r.mean_baseline(begin, end)},
                    {"terms", terms}});
  }
  j["bins"] = bins;
  j["positions"] = {{"delta", r.delta},
                    {"baseline_nll", r.baseline_nll},
                    {"forced_nll", r.forced_nll},
                    {"count", r.count}};
  return j;
}

namespace {

nlohmann::ordered_json curve_json(const RatioCurve& c) {
  nlohmann::ordered_json ratio = nlohmann::ordered_json::array(), at = nlohmann::ordered_json::object();
  for (size_t k = 0; k < c.ratio.size(); ++k)
    ratio.push_back(c.count[k] > 0 ? nlohmann::ordered_json(c.ratio[k]) : nullptr);
  for (size_t k : {1, 16, 64, 256, 512})
    if (k <= c.ratio.size() && c.count[k - 1] > 0) at[std::to_string(k)] = c.ratio[k - 1];
  return {{"ratio_at", at},
          {"present_norm", c.present_norm},
          {"zero_present", c.zero_present},
          {"ratio", ratio},
          {"count", c.count}};
}

}  // namespace

nlohmann::ordered_json gradient_routing_json(const GradientRoutingResult& r) {
  nlohmann::ordered_json j;
  j["window"] = r.window;
  j["target_begin"] = r.target_begin;
  j["target_end"] = r.target_end;
  j["max_k"] = r.max_k;
  j["sequences"] = r.sequences;
  j["targets"] = r.targets;
  j["backwards"] = r.backwards;
  nlohmann::ordered_json streams;
  for (const StreamRouting& s : r.streams) {
    nlohmann::ordered_json st = {{"persistent", s.persistent}, {"readout", s.readout}};
    st.update(curve_json(s.all));
    st["without_readout"] = curve_json(s.without_readout);
    streams[s.name] = st;
  }
  j["streams"] = streams;
  return j;
}

PlotSeries delta_series(const PersistentWindowResult& r, const std::string& title, int color) {
  PlotSeries s{title, {}, color, false};
  for (int64_t p = 0; p < r.length; ++p)
    if (r.count[size_t(p)] > 0) s.points.emplace_back(double(p), r.delta[size_t(p)]);
  return s;
}

PlotSeries ratio_series(const RatioCurve& curve, const std::string& title, int color, bool dashed) {
  PlotSeries s{title, {}, color, dashed};
  for (size_t k = 0; k < curve.ratio.size(); ++k)
    if (curve.count[k] > 0) s.points.emplace_back(double(k + 1), curve.ratio[k]);
  return s;
}

}  // namespace sps::analysis
