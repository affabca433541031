// The layer rule of docs/architecture.md: a file of src/<area>/ includes headers of its own
// area and of the areas it links (CMakeLists.txt's sps_area lines, followed transitively),
// nothing above. Linking alone does not catch a header-only use of a higher area. The
// frontends (cli/, python/) sit on top of all of it.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace sps::testing {
namespace {

namespace fs = std::filesystem;
const fs::path kSourceDir = SPS_SOURCE_DIR;

// area → the areas it links directly, from `sps_area(name dep…)` in CMakeLists.txt.
std::map<std::string, std::set<std::string>> declared_links() {
  std::ifstream in(kSourceDir / "CMakeLists.txt");
  std::map<std::string, std::set<std::string>> links;
  const std::regex call(R"(^sps_area\((\w+)([^)]*)\))");
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (!std::regex_search(line, m, call)) continue;
    std::set<std::string>& deps = links[m[1]];
    std::istringstream args(m[2].str());
    for (std::string arg; args >> arg;)
      if (arg.rfind("sps_", 0) == 0) deps.insert(arg.substr(4));
  }
  return links;
}

std::set<std::string> reachable(const std::map<std::string, std::set<std::string>>& links,
                                const std::string& area) {
  std::set<std::string> seen{area};
  std::vector<std::string> todo{area};
  while (!todo.empty()) {
    const std::string a = todo.back();
    todo.pop_back();
    const auto it = links.find(a);
    if (it == links.end()) continue;
    for (const std::string& d : it->second)
      if (seen.insert(d).second) todo.push_back(d);
  }
  return seen;
}

TEST(Layers, EveryIncludeIsOfTheOwnAreaOrALinkedOne) {
  const auto links = declared_links();
  ASSERT_GE(links.size(), 10u) << "sps_area lines not found in CMakeLists.txt";
  const std::regex include(R"(^#include "(\w+)/)");
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(kSourceDir / "src")) {
    const fs::path& path = entry.path();
    if (path.extension() != ".cpp" && path.extension() != ".h") continue;
    const std::string area = path.lexically_relative(kSourceDir / "src").begin()->string();
    if (area == "cli" || area == "python") continue;  // frontends: FrontendsSitOnTop
    ASSERT_TRUE(links.count(area)) << area << " has no sps_area line";
    const std::set<std::string> allowed = reachable(links, area);
    std::ifstream in(path);
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      std::smatch m;
      if (std::regex_search(line, m, include) && !allowed.count(m[1]))
        ADD_FAILURE() << path.lexically_relative(kSourceDir).string() << ":" << number << " includes "
                      << m[1] << "/, which " << area << " does not link";
    }
    ++files;
  }
  EXPECT_GT(files, 100);
}

// A backend is its own folder of src/ops/ (ops/cpu/, ops/cuda/): the layers above reach it
// through ops/backend.h and the registry's capabilities (ops/backend_registry.h), so nothing
// outside src/ops/ includes a backend's headers.
TEST(Layers, OnlyOpsIncludesABackendsFolder) {
  const std::regex include(R"(^#include "ops/(\w+)/)");
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(kSourceDir / "src")) {
    const fs::path& path = entry.path();
    if (path.extension() != ".cpp" && path.extension() != ".h") continue;
    if (*path.lexically_relative(kSourceDir / "src").begin() == "ops") continue;
    std::ifstream in(path);
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      std::smatch m;
      if (std::regex_search(line, m, include))
        ADD_FAILURE() << path.lexically_relative(kSourceDir).string() << ":" << number
                      << " includes ops/" << m[1] << "/, a backend's folder";
    }
    ++files;
  }
  EXPECT_GT(files, 100);
}

// The two frontends link every area: the binary (cli/) and the Python module (python/),
// which of cli/ uses only the model and tokenizer loading the commands share. Nothing below
// them knows Python.
TEST(Layers, FrontendsSitOnTop) {
  const std::regex include(R"(^#include [<"]([^>"]+)[>"])");
  int python_files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(kSourceDir / "src")) {
    const fs::path& path = entry.path();
    if (path.extension() != ".cpp" && path.extension() != ".h") continue;
    const std::string area = path.lexically_relative(kSourceDir / "src").begin()->string();
    python_files += area == "python";
    std::ifstream in(path);
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      std::smatch m;
      if (!std::regex_search(line, m, include)) continue;
      const std::string header = m[1];
      const std::string where =
          path.lexically_relative(kSourceDir).string() + ":" + std::to_string(number);
      const bool python_header = header.rfind("pybind11/", 0) == 0 || header == "Python.h" ||
                                 header == "pythread.h" || header.rfind("python/", 0) == 0;
      if (python_header && area != "python") ADD_FAILURE() << where << " includes " << header;
      if (area == "python" && header.rfind("cli/", 0) == 0 && header != "cli/model_files.h")
        ADD_FAILURE() << where << " includes " << header << " (of cli/, only model_files.h)";
    }
  }
  EXPECT_GT(python_files, 5);
}

// docs/architecture.md's table of areas says what each links (third column) and lists the
// areas top down; both must be CMakeLists.txt's: the links exactly (besides util), and every
// linked area in a later row.
TEST(Layers, ArchitectureTableIsTheLinkOrder) {
  const auto links = declared_links();
  std::ifstream in(kSourceDir / "docs/architecture.md");
  const std::regex row(R"(^\|[^|]*\| `src/(\w+)/` \| ([^|]*) \|)");
  std::vector<std::string> order;
  std::map<std::string, std::set<std::string>> documented;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, row)) continue;
    const std::string area = m[1];
    order.push_back(area);
    std::set<std::string>& said = documented[area];
    const std::regex name(R"(\b[a-z]+\b)");
    const std::string column = m[2];
    for (auto it = std::sregex_iterator(column.begin(), column.end(), name);
         it != std::sregex_iterator(); ++it)
      said.insert(it->str());
  }
  ASSERT_GE(order.size(), 12u) << "the table of areas was not found in docs/architecture.md";
  for (size_t i = 0; i < order.size(); ++i) {
    const std::string& area = order[i];
    if (area == "cli" || area == "python" || area == "ops") continue;  // every area; backends
    ASSERT_TRUE(links.count(area)) << area << " has no sps_area line";
    std::set<std::string> linked = links.at(area);
    linked.erase("util");
    EXPECT_EQ(documented[area], linked) << "docs/architecture.md: what " << area << " links";
    for (const std::string& d : linked)
      EXPECT_TRUE(std::find(order.begin() + i + 1, order.end(), d) != order.end())
          << "docs/architecture.md lists " << d << " above " << area << ", which links it";
  }
}

}  // namespace
}  // namespace sps::testing
