#pragma once
// `forensics report` as text for a terminal: the verdict first, then the evidence and next
// steps, the data problems, the stack classes and a compact rank grid by stack class.
#include <string>

#include "hangwatch/verdict/report.h"

namespace hangwatch::verdict {

class TextReportWriter {
 public:
  static std::string write(const Report& r);
  // The grid letter of stack class `index` ('A'.., then 'a'..); '#' past 52 classes.
  static char classLetter(int index);
};

}  // namespace hangwatch::verdict
