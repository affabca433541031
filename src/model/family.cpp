#include "model/family.h"

#include <fmt/format.h>

#include "util/error.h"

namespace sps {

Family family_by_name(const std::string& name) {
  if (name == "standard") return {name, false, Slot::input, Slot::input};
  if (name == "sps") return {name, true, Slot::input, Slot::predict};
  if (name == "reverse_sps") return {name, true, Slot::predict, Slot::input};
  if (name == "delayed_state") return {name, true, Slot::predict, Slot::predict};
  fail("model.family: unknown family '{}' (expected standard, sps, reverse_sps or delayed_state)",
       name);
}

const std::vector<FamilyEntry>& family_registry() {
  static const std::vector<FamilyEntry> entries = {
      {"standard", "standard", WindowRule::none},
      {"2x_memory", "sps", WindowRule::every_position},
      {"delayed_state", "delayed_state", WindowRule::swept},
      {"reverse_sps", "reverse_sps", WindowRule::swept},
      {"sps", "sps", WindowRule::swept},
  };
  return entries;
}

const std::vector<std::string>& family_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const FamilyEntry& e : family_registry()) n.push_back(e.name);
    return n;
  }();
  return names;
}

const FamilyEntry& family_entry(const std::string& name, const std::string& what) {
  for (const FamilyEntry& e : family_registry())
    if (e.name == name) return e;
  fail("{}: '{}': expected one of {}", what, name, fmt::join(family_names(), ", "));
}

bool window_is_swept(const std::string& name) {
  return family_entry(name, "family").window == WindowRule::swept;
}

}  // namespace sps
