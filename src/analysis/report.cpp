#include "analysis/report.h"

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
    nlohmann::ordered_json ratio = nlohmann::ordered_json::array();
    for (size_t k = 0; k < s.ratio.size(); ++k)
      ratio.push_back(s.count[k] > 0 ? nlohmann::ordered_json(s.ratio[k]) : nullptr);
    nlohmann::ordered_json at;
    for (int64_t k : {1, 16, 64, 256, 512})
      if (k <= int64_t(s.ratio.size()) && s.count[size_t(k - 1)] > 0)
        at[std::to_string(k)] = s.ratio[size_t(k - 1)];
    streams[s.name] = {{"persistent", s.persistent},
                       {"readout", s.readout},
                       {"present_norm", s.present_norm},
                       {"zero_present", s.zero_present},
                       {"ratio_at", at},
                       {"ratio", ratio},
                       {"count", s.count}};
  }
  j["streams"] = streams;
  return j;
}

PlotSeries delta_series(const PersistentWindowResult& r, const std::string& title) {
  PlotSeries s{title, {}};
  for (int64_t p = 0; p < r.length; ++p)
    if (r.count[size_t(p)] > 0) s.points.emplace_back(double(p), r.delta[size_t(p)]);
  return s;
}

PlotSeries ratio_series(const StreamRouting& stream, const std::string& title) {
  PlotSeries s{title, {}};
  for (size_t k = 0; k < stream.ratio.size(); ++k)
    if (stream.count[k] > 0) s.points.emplace_back(double(k + 1), stream.ratio[k]);
  return s;
}

}  // namespace sps::analysis
