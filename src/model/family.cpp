#include "model/family.h"

#include <fmt/format.h>

#include "util/error.h"

namespace sps {

const std::vector<StudyFamily>& study_families() {
  constexpr Slot in = Slot::input, pred = Slot::predict;
  // Colours: Okabe-Ito, readable in colour-blind vision and in grey.
  static const std::vector<StudyFamily> entries = {
      {"standard", "standard", WindowRule::none, "#000000",
       "modeling.models.full_attention_model.Model", false, in, in},
      {"2x_memory", "sps", WindowRule::every_position, "#e69f00", ""},
      {"delayed_state", "delayed_state", WindowRule::swept, "#009e73",
       "modeling.models.delayed_state.DelayedStateModel", true, pred, pred},
      {"reverse_sps", "reverse_sps", WindowRule::swept, "#cc3311",
       "modeling.models.reverse_sps.ReverseSPSModel", true, pred, in},
      {"sps", "sps", WindowRule::swept, "#0072b2", "modeling.models.sps.SPSModel", true, in, pred},
  };
  return entries;
}

Family family_by_name(const std::string& name) {
  std::vector<std::string> model_families;
  for (const StudyFamily& e : study_families()) {
    if (!e.is_model_family()) continue;
    if (e.name == name) return {e.name, e.interleaved, e.persistent_slot, e.readout_slot};
    model_families.push_back(e.name);
  }
  fail("model.family: unknown family '{}' (expected {} or {})", name,
       fmt::join(model_families.begin(), model_families.end() - 1, ", "), model_families.back());
}

const std::vector<std::string>& study_family_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const StudyFamily& e : study_families()) n.push_back(e.name);
    return n;
  }();
  return names;
}

const StudyFamily& study_family(const std::string& name, const std::string& what) {
  for (const StudyFamily& e : study_families())
    if (e.name == name) return e;
  fail("{}: '{}': expected one of {}", what, name, fmt::join(study_family_names(), ", "));
}

bool window_is_swept(const std::string& name) {
  return study_family(name, "family").window == WindowRule::swept;
}

std::string family_of_reference_class(const std::string& reference_class) {
  for (const StudyFamily& e : study_families())
    if (!e.reference_class.empty() && e.reference_class == reference_class) return e.model_family;
  return "";
}

}  // namespace sps
