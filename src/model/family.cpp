#include "model/family.h"

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

}  // namespace sps
