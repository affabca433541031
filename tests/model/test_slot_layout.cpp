// docs/model.md §3–§5 facts about slots, documents, positions and loss accounting.
#include <gtest/gtest.h>

#include <set>

#include "model/family.h"
#include "model/slot_layout.h"
#include "model_fixtures.h"
#include "util/error.h"

namespace sps::testing {
namespace {

TEST(SlotLayout, DocumentsCountPrecedingEos) {
  const ModelConfig c = micro_config("sps", 2);
  const int32_t E = c.eos_token_id;
  const std::vector<int32_t> x = {1, E, E, E, 2, 3};
  SlotLayout L;
  build_slot_layout(L, x.data(), 1, 6, c, family_by_name("sps"));
  EXPECT_EQ(L.doc, (std::vector<int32_t>{0, 0, 1, 2, 3, 3}));
  EXPECT_EQ(L.doc_start, (std::vector<int32_t>{0, 0, 2, 3, 4, 4}));
  // Positions never reset at document boundaries inside a training window.
  EXPECT_EQ(L.positions, (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  // An EOS target is trained (pair 0 predicts E); the term after an EOS is not.
  EXPECT_EQ(L.keep, (std::vector<uint8_t>{1, 0, 0, 0, 1, 1}));
  EXPECT_EQ(L.kept, 3);
}

TEST(SlotLayout, InterleavedSlotsAreStreamMajor) {
  const ModelConfig c = micro_config("sps", 2);
  const std::vector<int32_t> x = {5, 6, 7};
  SlotLayout L;
  build_slot_layout(L, x.data(), 1, 3, c, family_by_name("delayed_state"));
  const int32_t P = c.predict_token_id;
  EXPECT_EQ(L.slot_tokens, (std::vector<int32_t>{5, 6, 7, P, P, P}));
  build_slot_layout(L, x.data(), 1, 3, c, family_by_name("standard"));
  EXPECT_EQ(L.slot_tokens, (std::vector<int32_t>{5, 6, 7}));
}

TEST(SlotLayout, LeftPaddingIsItsOwnDocumentsAndPositionsStartAtFirstRealToken) {
  const ModelConfig c = micro_config("sps", 2);
  const int32_t P = c.pad_token_id, E = c.eos_token_id;
  const std::vector<int32_t> x = {P, P, 4, E, 9};
  SlotLayout L;
  build_slot_layout(L, x.data(), 1, 5, c, family_by_name("sps"));
  EXPECT_EQ(L.positions[2], 0);
  EXPECT_EQ(L.positions[4], 2);
  EXPECT_NE(L.doc[0], L.doc[1]);
  EXPECT_NE(L.doc[0], L.doc[2]);
  EXPECT_EQ(L.doc[2], 0);
  EXPECT_EQ(L.doc[4], 1);
  EXPECT_EQ(L.keep, (std::vector<uint8_t>{0, 0, 1, 0, 1}));
}

TEST(Family, TableOfSpec) {
  const Family sps = family_by_name("sps");
  EXPECT_TRUE(sps.interleaved);
  EXPECT_EQ(sps.persistent_slot, Slot::input);
  EXPECT_EQ(sps.readout_slot, Slot::predict);
  const Family rev = family_by_name("reverse_sps");
  EXPECT_EQ(rev.persistent_slot, Slot::predict);
  EXPECT_EQ(rev.readout_slot, Slot::input);
  const Family delayed = family_by_name("delayed_state");
  EXPECT_EQ(delayed.persistent_slot, Slot::predict);
  EXPECT_EQ(delayed.readout_slot, Slot::predict);
  EXPECT_FALSE(family_by_name("standard").interleaved);
  EXPECT_THROW(family_by_name("sps2"), UserError);
  // Rows within a position's slot pair; a one-slot family has only row 0.
  EXPECT_EQ(sps.persistent_stream(), 0);
  EXPECT_EQ(sps.readout_stream(), 1);
  EXPECT_EQ(rev.persistent_stream(), 1);
  EXPECT_EQ(rev.readout_stream(), 0);
  EXPECT_EQ(delayed.persistent_stream(), 1);
  EXPECT_EQ(delayed.readout_stream(), 1);
  EXPECT_EQ(family_by_name("standard").persistent_stream(), 0);
  EXPECT_EQ(family_by_name("standard").readout_stream(), 0);
}

TEST(FamilyRegistry, EveryEntryBuildsAModelAndTablesListStandardFirst) {
  const std::vector<std::string> names = study_family_names();
  EXPECT_EQ(names, (std::vector<std::string>{"standard", "2x_memory", "delayed_state",
                                             "reverse_sps", "sps"}));
  for (const StudyFamily& e : study_families()) EXPECT_NO_THROW(family_by_name(e.model_family));
  const StudyFamily& double_memory = study_family("2x_memory", "families");
  EXPECT_EQ(double_memory.model_family, "sps");
  EXPECT_EQ(double_memory.window, WindowRule::every_position);
  EXPECT_EQ(study_family("standard", "families").window, WindowRule::none);
  EXPECT_TRUE(window_is_swept("reverse_sps"));
  EXPECT_FALSE(window_is_swept("2x_memory"));
  try {
    study_family("gpt", "--families");
    ADD_FAILURE() << "no error for an unknown family";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "--families: 'gpt': expected one of standard, 2x_memory, "
                           "delayed_state, reverse_sps, sps");
  }
}

TEST(FamilyRegistry, ModelFamiliesColoursAndReferenceClassesComeFromTheRows) {
  std::set<std::string> colours, classes;
  for (const StudyFamily& e : study_families()) {
    // Every row is built as a row that is a model family.
    EXPECT_TRUE(study_family(e.model_family, "families").is_model_family()) << e.name;
    EXPECT_TRUE(colours.insert(e.color).second) << e.name << ": a colour of its own";
    EXPECT_EQ(e.color.size(), 7u) << e.name;
    if (e.reference_class.empty()) continue;
    EXPECT_TRUE(classes.insert(e.reference_class).second) << e.name;
    EXPECT_EQ(family_of_reference_class(e.reference_class), e.model_family);
  }
  EXPECT_EQ(family_of_reference_class("modeling.models.sps.SPSModel"), "sps");
  EXPECT_EQ(family_of_reference_class("modeling.models.other.Model"), "");
  EXPECT_EQ(family_of_reference_class(""), "");
  try {
    family_by_name("2x_memory");  // a study's family, not a model family
    ADD_FAILURE() << "no error for a family that is not a model family";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "model.family: unknown family '2x_memory' (expected standard, "
                           "delayed_state, reverse_sps or sps)");
  }
}

}  // namespace
}  // namespace sps::testing
