#include "hangwatch/forensics/python/python_stacks.h"

#include <cstdio>

#include <fmt/format.h>

#include "hangwatch/forensics/python/process_memory.h"
#include "hangwatch/forensics/python/python_interpreter_locator.h"
#include "hangwatch/forensics/python/python_layout.h"
#include "hangwatch/forensics/python/python_stack_reader.h"

namespace hangwatch::forensics {
namespace {

std::string versionString(uint32_t hex) {
  std::string v = fmt::format("{}.{}.{}", hex >> 24, (hex >> 16) & 0xff, (hex >> 8) & 0xff);
  const unsigned level = (hex >> 4) & 0xf;
  const unsigned serial = hex & 0xf;
  if (level == 0xa) v += fmt::format("a{}", serial);
  if (level == 0xb) v += fmt::format("b{}", serial);
  if (level == 0xc) v += fmt::format("rc{}", serial);
  return v;
}

}  // namespace

Expected<std::optional<PythonProcessStacks>> readPythonStacks(pid_t pid) {
  auto located = locateInterpreter(pid);
  if (!located) return Error{located.error()};
  if (!*located) return std::optional<PythonProcessStacks>{};
  const InterpreterLocation& loc = **located;

  ProcessMemory memory(pid);
  PythonProcessStacks result;
  int minor = loc.minor;
  if (loc.py_version_addr) {
    auto hex = memory.readValue<uint32_t>(*loc.py_version_addr);
    if (!hex) return Error{"cannot read Py_Version in " + loc.path};
    if ((*hex >> 24) != 3) return Error{fmt::format("Py_Version {} is not Python 3", *hex)};
    minor = static_cast<int>((*hex >> 16) & 0xff);
    result.version = versionString(*hex);
  }
  if (minor < 0) return Error{"cannot tell the Python version of " + loc.path};
  if (result.version.empty()) result.version = fmt::format("3.{}", minor);

  std::optional<PythonLayout> layout = pythonLayoutForMinor(minor);
  if (!layout && minor >= 13) {
    std::vector<unsigned char> block(kDebugOffsetsReadSize);
    if (!memory.read(loc.runtime_addr, block.data(), block.size()))
      return Error{"cannot read _Py_DebugOffsets in " + loc.path};
    auto from_target = pythonLayoutFromDebugOffsets(block, minor);
    if (!from_target) return Error{"Python " + result.version + ": " + from_target.error()};
    layout = *from_target;
  }
  if (!layout) return Error{"unsupported Python version " + result.version + " (3.10-3.13 are supported)"};

  PythonStackReader reader(memory, *layout);
  auto threads = reader.readThreads(loc.runtime_addr);
  if (!threads) return Error{fmt::format("Python {} in pid {}: {}", result.version, pid, threads.error())};
  result.threads = std::move(*threads);
  return std::optional<PythonProcessStacks>{std::move(result)};
}

}  // namespace hangwatch::forensics
