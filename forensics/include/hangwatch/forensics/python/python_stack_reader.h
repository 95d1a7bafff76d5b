#pragma once
// Walks a stopped CPython's interpreter and thread states and each thread's
// frame chain. Every pointer comes from a process that may have been stopped
// mid-update: reads are bounded and checked, and a bad chain ends the walk.
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "hangwatch/common/expected.h"
#include "hangwatch/stackmerge/python_thread.h"
#include "hangwatch/forensics/python/process_memory.h"
#include "hangwatch/forensics/python/python_object_reader.h"
#include "hangwatch/forensics/python/python_layout.h"

namespace hangwatch::forensics {

class PythonStackReader {
 public:
  PythonStackReader(ProcessMemory& memory, PythonLayout layout)
      : memory_(memory), layout_(std::move(layout)), objects_(memory_, layout_) {}

  Expected<std::vector<stackmerge::PythonThreadStack>> readThreads(uint64_t runtime_addr);

  static constexpr size_t kMaxThreads = 4096;
  static constexpr size_t kMaxFrames = 2048;
  static constexpr size_t kMaxInterpreters = 64;

 private:
  struct CodeInfo {
    std::string function;
    std::string file;
    int first_line = 0;
    std::string line_table;
    uint64_t instructions = 0;  // 3.11+: address of co_code_adaptive (3.10 frames carry f_lasti)
  };

  Expected<stackmerge::PythonThreadStack> readThread(uint64_t tstate);
  Expected<uint64_t> currentFrame(uint64_t tstate);
  const CodeInfo* code(uint64_t code_addr);

  ProcessMemory& memory_;
  PythonLayout layout_;
  PythonObjectReader objects_;
  std::unordered_map<uint64_t, CodeInfo> codes_;
};

}  // namespace hangwatch::forensics
