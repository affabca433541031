#include "util/yaml_config.h"

#include <gtest/gtest.h>

#include "util/error.h"
#include "util/temp_dir.h"
#include "util/user_error.h"

namespace sps {
namespace {

using testing::error_of;

using sps::testing::TempDir;
using sps::testing::write_whole_file;

#define EXPECT_USER_ERROR(action, fragment)                               \
  do {                                                                    \
    std::string message = error_of([&] { action; });                      \
    EXPECT_NE(message.find(fragment), std::string::npos) << message;      \
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;          \
  } while (0)

TEST(YamlConfig, LoadsFile) {
  TempDir dir;
  const std::string path = dir.file("c.yaml");
  write_whole_file(path, "model:\n  n_layer: 4\n  family: sps\ntrain:\n  lr: 6.0e-4\n");
  YAML::Node root = load_yaml_file(path);
  EXPECT_EQ(root["model"]["n_layer"].as<int>(), 4);
  EXPECT_EQ(root["model"]["family"].as<std::string>(), "sps");
  EXPECT_DOUBLE_EQ(root["train"]["lr"].as<double>(), 6e-4);
}

TEST(YamlConfig, MissingFileNamesIt) {
  TempDir dir;
  const std::string path = dir.file("absent.yaml");
  EXPECT_USER_ERROR(load_yaml_file(path), path);
}

TEST(YamlConfig, ParseErrorNamesFileAndLine) {
  TempDir dir;
  const std::string path = dir.file("broken.yaml");
  write_whole_file(path, "model:\n  n_layer: 4\n  hidden: [1, 2\n");
  EXPECT_USER_ERROR(load_yaml_file(path), path + ":4:");
  write_whole_file(path, "model:\n  a: 1\n   b: 2\n");
  EXPECT_USER_ERROR(load_yaml_file(path), path + ":3:");
}

TEST(YamlConfig, OverridesParseScalarsAsYaml) {
  YAML::Node root = YAML::Load("model:\n  n_layer: 4\n  family: standard\n");
  apply_override(root, "model.n_layer=16");
  apply_override(root, "model.family=sps");
  apply_override(root, "model.tied=true");
  apply_override(root, "model.name=\"16\"");
  apply_override(root, "model.list=[1, 2]");
  apply_override(root, "model.empty=");
  apply_override(root, "model.url=a=b");  // only the first '=' splits
  EXPECT_EQ(root["model"]["n_layer"].as<int64_t>(), 16);
  EXPECT_EQ(root["model"]["family"].as<std::string>(), "sps");
  EXPECT_TRUE(root["model"]["tied"].as<bool>());
  EXPECT_EQ(root["model"]["name"].Scalar(), "16");
  EXPECT_EQ(root["model"]["name"].Tag(), "!");  // quoted: a string
  ASSERT_TRUE(root["model"]["list"].IsSequence());
  EXPECT_EQ(root["model"]["list"][1].as<int>(), 2);
  EXPECT_TRUE(root["model"]["empty"].IsNull());
  EXPECT_EQ(root["model"]["url"].Scalar(), "a=b");
  EXPECT_EQ(root["model"].size(), 7u);  // replaced, not duplicated
}

TEST(YamlConfig, OverridesCreateNestedSections) {
  YAML::Node root = YAML::Load("");
  apply_overrides(root, {"train.optimizer.beta2=0.95", "train.steps=10", "top=1"});
  EXPECT_DOUBLE_EQ(root["train"]["optimizer"]["beta2"].as<double>(), 0.95);
  EXPECT_EQ(root["train"]["steps"].as<int>(), 10);
  EXPECT_EQ(root["top"].as<int>(), 1);
}

TEST(YamlConfig, MalformedOverrides) {
  YAML::Node root = YAML::Load("model:\n  n_layer: 4\n");
  EXPECT_USER_ERROR(apply_override(root, "model.n_layer"), "expected section.key=value");
  EXPECT_USER_ERROR(apply_override(root, "=3"), "empty name");
  EXPECT_USER_ERROR(apply_override(root, "model..n_layer=3"), "empty name");
  EXPECT_USER_ERROR(apply_override(root, "model.=3"), "empty name");
  EXPECT_USER_ERROR(apply_override(root, "model.n_layer.x=3"), "model.n_layer is '4', not a mapping");
  EXPECT_USER_ERROR(apply_override(root, "model.n_layer=[1, 2", "command line"),
                    "command line: override 'model.n_layer=[1, 2': cannot parse the value");
  EXPECT_EQ(root["model"]["n_layer"].as<int>(), 4);  // untouched by the failures
}

TEST(YamlConfig, TypedGetters) {
  YAML::Node n = YAML::Load("{i: 16, neg: -3, plus: +5, f: 1.0e-6, b: true, s: sps, bad: abc, "
                            "frac: 1.5, big: 99999999999999999999, inf: .inf, list: [1]}");
  EXPECT_EQ(yaml_int(n["i"], "F", "x.i"), 16);
  EXPECT_EQ(yaml_int(n["neg"], "F", "x.neg"), -3);
  EXPECT_EQ(yaml_int(n["plus"], "F", "x.plus"), 5);
  EXPECT_DOUBLE_EQ(yaml_double(n["f"], "F", "x.f"), 1e-6);
  EXPECT_DOUBLE_EQ(yaml_double(n["i"], "F", "x.i"), 16.0);
  EXPECT_TRUE(yaml_bool(n["b"], "F", "x.b"));
  EXPECT_EQ(yaml_string(n["s"], "F", "x.s"), "sps");
  EXPECT_USER_ERROR(yaml_int(n["bad"], "F", "x.bad"), "F: x.bad: expected an integer, got 'abc'");
  EXPECT_USER_ERROR(yaml_int(n["frac"], "F", "x.frac"), "expected an integer, got '1.5'");
  EXPECT_USER_ERROR(yaml_int(n["big"], "F", "x.big"), "out of range");
  EXPECT_USER_ERROR(yaml_int(n["list"], "F", "x.list"), "got a sequence");
  EXPECT_USER_ERROR(yaml_int(n["absent"], "F", "x.absent"), "got nothing");
  EXPECT_USER_ERROR(yaml_double(n["bad"], "F", "x.bad"), "expected a finite number");
  EXPECT_USER_ERROR(yaml_double(n["inf"], "F", "x.inf"), "expected a finite number");
  EXPECT_USER_ERROR(yaml_bool(n["i"], "F", "x.i"), "expected true or false, got '16'");
  EXPECT_USER_ERROR(yaml_string(n["list"], "F", "x.list"), "expected a string");
}

TEST(YamlConfig, CheckKeys) {
  YAML::Node n = YAML::Load("{a: 1, b: 2}");
  EXPECT_NO_THROW(check_yaml_keys(n, {"a", "b", "c"}, "F", "sec"));
  EXPECT_USER_ERROR(check_yaml_keys(n, {"a"}, "F", "sec"),
                    "F: sec.b: unknown key (expected one of a)");
  EXPECT_USER_ERROR(check_yaml_keys(YAML::Load("{a: 1, a: 2}"), {"a"}, "F", "sec"), "twice");
  EXPECT_USER_ERROR(check_yaml_keys(YAML::Load("[1]"), {"a"}, "F", "sec"), "expected a mapping");
}

}  // namespace
}  // namespace sps
