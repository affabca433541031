#pragma once
// A family is data: whether slots are interleaved, which slot's keys persist, and which
// slot the logits are read at. Window and ω come from the config.
//
// family_registry() is every family name a command accepts, one row each: the four model
// families and `2x_memory`, the paper's baseline that is sps with a window covering every
// position. Everything else that lists families (the parsing of model.family and its error
// message, matrices, run records, reports and their figures' colours, the reference trainer's
// class names in interop) reads the rows, so adding a family is one row (and, for a new mask,
// one case of the naive reference model in the tests).
#include <cstdint>
#include <string>
#include <vector>

namespace sps {

enum class Slot { input = 0, predict = 1 };

struct Family {
  std::string name;
  bool interleaved = false;
  Slot persistent_slot = Slot::input;  // standard: its only slot
  Slot readout_slot = Slot::input;

  int streams() const { return interleaved ? 2 : 1; }
  // The row of a position's slot pair that holds the persistent keys, and the one whose
  // output the logits read (0 in a family with one slot per position).
  int64_t persistent_stream() const { return interleaved ? int64_t(persistent_slot) : 0; }
  int64_t readout_stream() const { return interleaved ? int64_t(readout_slot) : 0; }
};

// A model family's mask (model.family: standard | sps | reverse_sps | delayed_state); throws
// UserError naming the model families for another name.
Family family_by_name(const std::string& name);

// Where a study's family gets its window.
enum class WindowRule {
  none,            // standard: every position sees every earlier one
  swept,           // the window the recipe or matrix gives
  every_position,  // w ≥ every position (2x_memory): the prediction stream sees all of it
};

struct FamilyEntry {
  std::string name;          // as recipes, matrices, run records and reports spell it
  std::string model_family;  // the model family it is built as: its own name, or another row's
  WindowRule window = WindowRule::none;
  std::string color;            // its series in report figures (windows differ by point and dash)
  std::string reference_class;  // the reference trainer's model class (config.model._target_)
  // The mask; read only where the row is a model family (model_family == name).
  bool interleaved = false;
  Slot persistent_slot = Slot::input;
  Slot readout_slot = Slot::input;

  bool is_model_family() const { return model_family == name; }
};

// Every entry, in the order tables list them: standard first, sps last.
const std::vector<FamilyEntry>& family_registry();
// The entry named `name`; throws UserError "{what}: '{name}': expected one of …".
const FamilyEntry& family_entry(const std::string& name, const std::string& what);
// Whether studies sweep the window of the family named `name` (sps, reverse_sps,
// delayed_state); throws like family_entry for an unknown name.
bool window_is_swept(const std::string& name);
// The registry's names, in its order.
const std::vector<std::string>& family_names();
// The model family whose reference class is `reference_class`, or "" for none.
std::string family_of_reference_class(const std::string& reference_class);

}  // namespace sps
