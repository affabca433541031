#pragma once
// Two kinds of family, named apart:
// - a model family (`Family`, a config's model.family: standard, sps, reverse_sps,
//   delayed_state) is a mask, and a mask is data: whether slots are interleaved, which slot's
//   keys persist, which slot the logits are read at. Window and ω come from the config.
// - a study family (`StudyFamily`) is what a comparison names: the four model families and
//   `2x_memory`, the paper's baseline that is the model family sps with a window covering
//   every position. Recipes, matrices, run records and reports speak of study families.
//
// study_families() is every family name a command accepts, one row each. Everything else that
// lists families (the parsing of model.family and its error message, matrices, run records,
// reports and their figures' colours, the reference trainer's class names in interop) reads
// the rows, so adding a family is one row (and, for a new mask, one case of the naive
// reference model in the tests).
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

// Where a study family gets its window.
enum class WindowRule {
  none,            // standard: every position sees every earlier one
  swept,           // the window the recipe or matrix gives
  every_position,  // w ≥ every position (2x_memory): the prediction stream sees all of it
};

struct StudyFamily {
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

// Every study family, in the order tables list them: standard first, sps last.
const std::vector<StudyFamily>& study_families();
// The study family named `name`; throws UserError "{what}: '{name}': expected one of …".
const StudyFamily& study_family(const std::string& name, const std::string& what);
// Whether studies sweep the window of the study family named `name` (sps, reverse_sps,
// delayed_state); throws like study_family for an unknown name.
bool window_is_swept(const std::string& name);
// The registry's names, in its order.
const std::vector<std::string>& study_family_names();
// The model family whose reference class is `reference_class`, or "" for none.
std::string family_of_reference_class(const std::string& reference_class);

}  // namespace sps
