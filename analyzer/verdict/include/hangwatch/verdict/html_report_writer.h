#pragma once
// `forensics report --format html`: one self-contained page (inline CSS and SVG, nothing
// fetched) with the verdict, the ring with the faulty link or rank in red, and the rank
// grid coloured by stack class.
#include <string>

#include "hangwatch/verdict/report.h"

namespace hangwatch::verdict {

class HtmlReportWriter {
 public:
  static std::string write(const Report& r);
  // Marks the culprit link or rank and nothing else, so a screenshot can be checked for it.
  static constexpr const char* kCulpritColour = "#ff0000";
  // Fill of stack class `index`; never the culprit colour.
  static std::string classColour(int index);
};

}  // namespace hangwatch::verdict
