#include <catch2/catch.hpp>
#include <cstdio>
#include <sstream>
#include <string>

#include "hangwatch/forensics/python/code_line_table.h"
#include "pystacks_targets/target_process.h"

using hangwatch::forensics::lineFromLineTable310;
using hangwatch::forensics::lineFromLocationTable;

namespace {

std::string fromHex(const std::string& hex) {
  std::string out;
  if (hex == "-") return out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return out;
}

// Decodes every stdlib code object's line table and compares with the interpreter's co_lines().
void checkAgainstInterpreter(int minor) {
  const auto interpreters = pystacks_test::interpretersFor(minor);
  if (interpreters.empty()) {
    WARN("SKIPPED: no Python 3." << minor << " installed");
    return;
  }
  for (const auto& python : interpreters) {
    INFO("interpreter " << python);
    std::istringstream in(pystacks_test::runAndCapture(python + " " + PYSTACKS_TARGETS_DIR + "/dump_line_tables.py"));
    std::string kind, table;
    int first_line = 0;
    size_t codes = 0, checked = 0;
    while (in >> kind) {
      if (kind == "code") {
        std::string hex;
        in >> first_line >> hex;
        table = fromHex(hex);
        ++codes;
        continue;
      }
      uint64_t start = 0, end = 0;
      int line = 0;
      in >> start >> end >> line;
      for (uint64_t offset = start; offset < end; offset += 2) {
        const auto decoded = minor == 10 ? lineFromLineTable310(table, first_line, offset)
                                         : lineFromLocationTable(table, first_line, offset / 2);
        const int got = decoded.value_or(-1);
        if (got != line) FAIL_CHECK("offset " << offset << " first line " << first_line << ": " << got << " != " << line);
        ++checked;
      }
    }
    CHECK(codes > 50);
    CHECK(checked > 1000);
  }
}

}  // namespace

TEST_CASE("LineTableMatchesInterpreterOnPython310") { checkAgainstInterpreter(10); }
TEST_CASE("LocationTableMatchesInterpreterOnPython311") { checkAgainstInterpreter(11); }
TEST_CASE("LocationTableMatchesInterpreterOnPython312") { checkAgainstInterpreter(12); }
TEST_CASE("LocationTableMatchesInterpreterOnPython313") { checkAgainstInterpreter(13); }
