#pragma once
// The analyses' results as JSON and as figure lines (docs/analysis.md lists the fields).
#include <nlohmann/json.hpp>
#include <string>

#include "analysis/gradient_routing.h"
#include "analysis/persistent_window.h"
#include "analysis/plot.h"

namespace sps::analysis {

// Summaries (Δ beyond ω, Δ in bins of `bin_width` positions) and the per-position arrays.
nlohmann::ordered_json persistent_window_json(const PersistentWindowResult& r, int64_t bin_width);
// ratio(k) and counts per stream, k = 1..max_k, and the window and targets used.
nlohmann::ordered_json gradient_routing_json(const GradientRoutingResult& r);

// Δℓ(p) against p, over the positions where some term counted.
PlotSeries delta_series(const PersistentWindowResult& r, const std::string& title, int color);
// ratio(k) against k where some target was averaged.
PlotSeries ratio_series(const RatioCurve& curve, const std::string& title, int color, bool dashed);

}  // namespace sps::analysis
