#pragma once
// A family is data: whether slots are interleaved, which slot's keys persist, and which
// slot the logits are read at. Window and ω come from the config.
#include <string>

namespace sps {

enum class Slot { input = 0, predict = 1 };

struct Family {
  std::string name;
  bool interleaved = false;
  Slot persistent_slot = Slot::input;  // standard: its only slot
  Slot readout_slot = Slot::input;

  int streams() const { return interleaved ? 2 : 1; }
};

// standard | sps | reverse_sps | delayed_state; throws UserError for another name.
Family family_by_name(const std::string& name);

}  // namespace sps
