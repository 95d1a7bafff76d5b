#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>

#include "hangwatch/forensics/python/process_memory.h"
#include "pystacks_targets/target_process.h"
#include "hangwatch/forensics/python/python_interpreter_locator.h"
#include "hangwatch/forensics/python/python_layout.h"

using hangwatch::forensics::layoutFields;
using hangwatch::forensics::PythonLayout;

namespace {

// Compiles layout_probe.c against the interpreter's own headers; empty when they are not installed.
std::map<std::string, uint64_t> probeOffsets(const std::string& python, int minor) {
  const std::string prefix = python.substr(0, python.rfind("/bin/"));
  const std::string include = prefix + "/include/python3." + std::to_string(minor);
  if (access((include + "/internal/pycore_frame.h").c_str(), R_OK) != 0 &&
      access((include + "/frameobject.h").c_str(), R_OK) != 0)
    return {};
  if (access((include + "/internal/pycore_runtime.h").c_str(), R_OK) != 0) return {};
  char dir_template[] = "/tmp/pystacks-probe-XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) return {};
  const std::string exe = std::string(dir) + "/probe";
  const std::string out = pystacks_test::runAndCapture(std::string(PYSTACKS_C_COMPILER) + " -I" + include + " -o " + exe + " " +
                                        PYSTACKS_TARGETS_DIR + "/layout_probe.c 2>&1 && " + exe);
  pystacks_test::runAndCapture("rm -rf " + std::string(dir));
  std::map<std::string, uint64_t> offsets;
  std::istringstream in(out);
  std::string name;
  uint64_t value = 0;
  while (in >> name >> value) offsets[name] = value;
  return offsets;
}

void compare(const PythonLayout& layout, const std::map<std::string, uint64_t>& probed) {
  for (const auto& [name, offset] : layoutFields(layout)) {
    INFO("field " << name);
    REQUIRE(probed.count(name) == 1);
    CHECK(offset == probed.at(name));
  }
}

std::map<std::string, uint64_t> probeFirstWithHeaders(int minor, std::string& python_out) {
  for (const auto& python : pystacks_test::interpretersFor(minor)) {
    auto probed = probeOffsets(python, minor);
    if (!probed.empty()) {
      python_out = python;
      return probed;
    }
  }
  return {};
}

void checkTable(int minor) {
  std::string python;
  const auto probed = probeFirstWithHeaders(minor, python);
  if (probed.empty()) {
    WARN("SKIPPED: no Python 3." << minor << " with internal headers installed");
    return;
  }
  INFO("headers of " << python);
  const auto layout = hangwatch::forensics::pythonLayoutForMinor(minor);
  REQUIRE(layout.has_value());
  compare(*layout, probed);
}

}  // namespace

TEST_CASE("OffsetTableMatchesHeadersOfPython310") { checkTable(10); }
TEST_CASE("OffsetTableMatchesHeadersOfPython311") { checkTable(11); }
TEST_CASE("OffsetTableMatchesHeadersOfPython312") { checkTable(12); }

TEST_CASE("DebugOffsetsOfLivePython313MatchHeaders") {
  std::string python;
  const auto probed = probeFirstWithHeaders(13, python);
  if (probed.empty()) {
    WARN("SKIPPED: no Python 3.13 with internal headers installed");
    return;
  }
  INFO("interpreter " << python);
  pystacks_test::TargetProcess target({python, "-c", "import time; print('ready', flush=True); time.sleep(60)"});
  REQUIRE(target.waitFor("ready", std::chrono::seconds(20)));
  auto located = hangwatch::forensics::locateInterpreter(target.pid());
  REQUIRE(located.ok());
  REQUIRE(located->has_value());
  hangwatch::forensics::ProcessMemory memory(target.pid());
  std::vector<unsigned char> block(hangwatch::forensics::kDebugOffsetsReadSize);
  REQUIRE(memory.read((*located)->runtime_addr, block.data(), block.size()));
  auto layout = hangwatch::forensics::pythonLayoutFromDebugOffsets(block, 13);
  INFO((layout ? std::string() : layout.error()));
  REQUIRE(layout.ok());
  compare(*layout, probed);
}

TEST_CASE("UnknownMinorVersionHasNoTable") {
  CHECK_FALSE(hangwatch::forensics::pythonLayoutForMinor(9).has_value());
  CHECK_FALSE(hangwatch::forensics::pythonLayoutForMinor(14).has_value());
  std::vector<unsigned char> block(hangwatch::forensics::kDebugOffsetsReadSize, 0);
  auto layout = hangwatch::forensics::pythonLayoutFromDebugOffsets(block, 13);
  REQUIRE_FALSE(layout.ok());
  CHECK(layout.error().find("cookie") != std::string::npos);
}
