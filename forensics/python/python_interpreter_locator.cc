#include "hangwatch/forensics/python/python_interpreter_locator.h"

#include <unistd.h>

#include <cctype>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>

#include <fmt/format.h>

#include "hangwatch/forensics/python/elf_symbol_table.h"

namespace hangwatch::forensics {
namespace {

struct MappedObject {
  std::string path;
  int minor = -1;
  bool is_library = false;
  uint64_t base = 0;  // start of the mapping at file offset 0
  bool have_base = false;
};

// Digits of "3.<minor>" right after `prefix` in `name`, and where they end.
std::optional<int> minorAfter(const std::string& name, size_t prefix, size_t& end) {
  end = prefix;
  while (end < name.size() && std::isdigit(static_cast<unsigned char>(name[end]))) ++end;
  if (end == prefix || end - prefix > 3) return std::nullopt;
  return std::stoi(name.substr(prefix, end - prefix));
}

// "libpython3.12.so.1.0", "libpython3.13d.so", "python3.11", "python3"; map names
// are checked per mapping, so this stays a cheap string scan.
bool classify(const std::string& basename, MappedObject& obj) {
  size_t end = 0;
  if (basename.rfind("libpython3.", 0) == 0) {
    auto minor = minorAfter(basename, 11, end);
    if (!minor || basename.find(".so", end) == std::string::npos) return false;
    obj.is_library = true;
    obj.minor = *minor;
    return true;
  }
  if (basename == "python3") return true;
  if (basename.rfind("python3.", 0) != 0) return false;
  auto minor = minorAfter(basename, 8, end);
  // Only ABI flag letters may follow ("python3.13t", "python3.12d").
  for (size_t i = end; i < basename.size(); ++i)
    if (!std::islower(static_cast<unsigned char>(basename[i]))) return false;
  if (!minor) return false;
  obj.minor = *minor;
  return true;
}

std::string fileInTargetRoot(pid_t pid, const std::string& path) {
  const std::string rooted = fmt::format("/proc/{}/root{}", pid, path);
  return ::access(rooted.c_str(), R_OK) == 0 ? rooted : path;
}

}  // namespace

Expected<std::optional<InterpreterLocation>> locateInterpreter(pid_t pid) {
  std::ifstream maps(fmt::format("/proc/{}/maps", pid));
  if (!maps) return Error{fmt::format("cannot read /proc/{}/maps (no such process?)", pid)};
  std::map<std::string, MappedObject> objects;
  std::string line;
  while (std::getline(maps, line)) {
    std::istringstream in(line);
    std::string range, perms, offset_hex, dev, inode, path;
    if (!(in >> range >> perms >> offset_hex >> dev >> inode)) continue;
    std::getline(in >> std::ws, path);
    if (path.empty() || path[0] != '/') continue;
    MappedObject candidate;
    const std::string basename = path.substr(path.rfind('/') + 1);
    if (!classify(basename, candidate)) continue;
    auto& obj = objects.try_emplace(path, candidate).first->second;
    obj.path = path;
    const uint64_t start = std::stoull(range.substr(0, range.find('-')), nullptr, 16);
    if (std::stoull(offset_hex, nullptr, 16) == 0 && (!obj.have_base || start < obj.base)) {
      obj.base = start;
      obj.have_base = true;
    }
  }
  if (objects.empty()) return std::optional<InterpreterLocation>{};

  // libpython holds the runtime when it is mapped; the executable then only calls into it.
  std::vector<const MappedObject*> order;
  for (const auto& [path, obj] : objects)
    if (obj.is_library) order.push_back(&obj);
  for (const auto& [path, obj] : objects)
    if (!obj.is_library) order.push_back(&obj);

  std::string why;
  for (const MappedObject* obj : order) {
    if (!obj->have_base) continue;
    auto symbols = loadElfSymbols(fileInTargetRoot(pid, obj->path), {"_PyRuntime", "Py_Version"});
    if (!symbols) {
      why = symbols.error();
      continue;
    }
    auto runtime = symbols->symbols.find("_PyRuntime");
    if (runtime == symbols->symbols.end()) continue;
    const uint64_t bias = obj->base - symbols->first_load_vaddr;
    InterpreterLocation loc;
    loc.path = obj->path;
    loc.minor = obj->minor;
    loc.runtime_addr = runtime->second + bias;
    if (auto v = symbols->symbols.find("Py_Version"); v != symbols->symbols.end()) loc.py_version_addr = v->second + bias;
    return std::optional<InterpreterLocation>{loc};
  }
  // A python-named object without _PyRuntime: a CPython we cannot read, or not CPython at all.
  bool any_library = false;
  for (const auto& [path, obj] : objects) any_library |= obj.is_library;
  if (any_library || !why.empty())
    return Error{"CPython is mapped (" + order.front()->path + ") but _PyRuntime was not found" +
                 (why.empty() ? std::string() : ": " + why)};
  return std::optional<InterpreterLocation>{};
}

}  // namespace hangwatch::forensics
