#include "hangwatch/forensics/remote_unwinder.h"

#include <cxxabi.h>
#include <fcntl.h>
#include <unistd.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace hangwatch::forensics {
namespace {

char* g_debuginfo_path = nullptr;

// Local debug files only: by build id, then by .gnu_debuglink next to the object, in
// its .debug/ and under /usr/lib/debug. dwfl_standard_find_debuginfo would also load
// the debuginfod client (libcurl, TLS) for every object without one: slower than the unwind.
int findLocalDebuginfo(Dwfl_Module* mod, void** userdata, const char* modname, GElf_Addr base, const char* file_name,
                       const char* debuglink_file, GElf_Word debuglink_crc, char** debuginfo_file_name) {
  int fd = dwfl_build_id_find_debuginfo(mod, userdata, modname, base, file_name, debuglink_file, debuglink_crc,
                                        debuginfo_file_name);
  if (fd >= 0 || file_name == nullptr || debuglink_file == nullptr || *debuglink_file == '\0') return fd;
  std::string path = file_name;
  std::string dir = path.substr(0, path.rfind('/') == std::string::npos ? 0 : path.rfind('/'));
  for (const std::string& candidate :
       {dir + "/" + debuglink_file, dir + "/.debug/" + debuglink_file, "/usr/lib/debug" + dir + "/" + debuglink_file}) {
    if (candidate == path) continue;
    fd = ::open(candidate.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      *debuginfo_file_name = ::strdup(candidate.c_str());
      return fd;
    }
  }
  return -1;
}

const Dwfl_Callbacks kProcCallbacks = {
    dwfl_linux_proc_find_elf,
    findLocalDebuginfo,
    nullptr,
    &g_debuginfo_path,
};

std::string dwflError() { return dwfl_errmsg(-1) ? dwfl_errmsg(-1) : "unknown libdwfl error"; }

std::string demangled(const char* name) {
  // "pthread_cond_wait@@GLIBC_2.3.2": the symbol version is not part of the function's name.
  std::string plain(name);
  if (size_t at = plain.find('@'); at != std::string::npos && at > 0) plain.resize(at);
  name = plain.c_str();
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || d == nullptr) return name;
  std::string out(d);
  std::free(d);
  return out;
}

// System libraries' line tables sit in separate, compressed debug files whose
// decompression costs more than the whole unwind; their frames keep function and module.
bool lineInfoWanted(const std::string& module) {
  for (const char* prefix : {"/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/"}) {
    if (module.rfind(prefix, 0) == 0) return false;
  }
  return true;
}

struct UnwindWalk {
  RemoteUnwinder* self;
  std::vector<std::pair<uint64_t, bool>> pcs;  // pc, is activation (innermost or signal frame)
  Deadline deadline;
  size_t max_frames;
  bool timed_out = false;
};

}  // namespace

Expected<Dwfl*> RemoteUnwinder::openProcess(pid_t pid) {
  Dwfl* dwfl = dwfl_begin(&kProcCallbacks);
  if (dwfl == nullptr) return Error{"dwfl_begin: " + dwflError()};
  dwfl_report_begin(dwfl);
  int rc = dwfl_linux_proc_report(dwfl, pid);
  std::string error;
  if (rc != 0) {
    error = fmt::format("reading the modules of {}: {}", pid, rc > 0 ? std::strerror(rc) : dwflError());
  } else if (dwfl_report_end(dwfl, nullptr, nullptr) != 0) {
    error = "dwfl_report_end: " + dwflError();
  } else if ((rc = dwfl_linux_proc_attach(dwfl, pid, /*assume_ptrace_stopped=*/true)) != 0) {
    // assume_ptrace_stopped: we hold the threads; libdwfl must neither attach nor detach.
    error = "dwfl_linux_proc_attach: " + (rc > 0 ? std::string(std::strerror(rc)) : dwflError());
  }
  if (!error.empty()) {
    dwfl_end(dwfl);
    return Error{error};
  }
  return dwfl;
}

Expected<std::unique_ptr<RemoteUnwinder>> RemoteUnwinder::forStoppedProcess(pid_t pid) {
  Expected<Dwfl*> dwfl = openProcess(pid);
  if (!dwfl) return Error{dwfl.error()};
  return std::unique_ptr<RemoteUnwinder>(new RemoteUnwinder(pid, *dwfl));
}

RemoteUnwinder::~RemoteUnwinder() {
  if (dwfl_ != nullptr) dwfl_end(dwfl_);
}

namespace {

// The name a DWARF function entry (or its abstract origin) carries, demangled.
std::string dieFunctionName(Dwarf_Die* die) {
  Dwarf_Attribute attr;
  const char* name = nullptr;
  if (dwarf_attr_integrate(die, DW_AT_linkage_name, &attr) || dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr)) {
    name = dwarf_formstring(&attr);
  }
  if (name != nullptr) return demangled(name);
  name = dwarf_diename(die);
  if (name == nullptr && dwarf_attr_integrate(die, DW_AT_name, &attr)) name = dwarf_formstring(&attr);
  return name ? name : "??";
}

// Where an inlined call stands in its caller: DW_AT_call_file / DW_AT_call_line.
void callSite(Dwarf_Die* cudie, Dwarf_Die* inlined, StackFrame& caller) {
  Dwarf_Attribute attr;
  Dwarf_Word file_index = 0;
  Dwarf_Word line = 0;
  Dwarf_Files* files = nullptr;
  size_t nfiles = 0;
  if (dwarf_formudata(dwarf_attr(inlined, DW_AT_call_file, &attr), &file_index) == 0 &&
      dwarf_getsrcfiles(cudie, &files, &nfiles) == 0 && file_index < nfiles) {
    if (const char* f = dwarf_filesrc(files, file_index, nullptr, nullptr)) caller.file = f;
  }
  if (dwarf_formudata(dwarf_attr(inlined, DW_AT_call_line, &attr), &line) == 0 && line > 0) {
    caller.line = static_cast<int>(line);
  }
}

}  // namespace

std::vector<StackFrame> RemoteUnwinder::symbolize(uint64_t pc, uint64_t lookup_pc) {
  auto cached = symbols_.find(lookup_pc);
  if (cached != symbols_.end()) {
    std::vector<StackFrame> frames = cached->second;
    for (StackFrame& f : frames) f.pc = pc;
    return frames;
  }
  StackFrame f;
  f.kind = FrameKind::kNative;
  f.function = "??";
  f.pc = pc;
  std::vector<StackFrame> frames;
  if (Dwfl_Module* mod = dwfl_addrmodule(dwfl_, lookup_pc)) {
    Dwarf_Addr start = 0;
    const char* name = dwfl_module_info(mod, nullptr, &start, nullptr, nullptr, nullptr, nullptr, nullptr);
    if (name != nullptr) f.module = name;
    f.offset = pc - start;
    GElf_Off sym_off = 0;
    GElf_Sym sym;
    if (const char* fn = dwfl_module_addrinfo(mod, lookup_pc, &sym_off, &sym, nullptr, nullptr, nullptr)) {
      f.function = demangled(fn);
    }
    if (lineInfoWanted(f.module)) {
      if (Dwfl_Line* line = dwfl_module_getsrc(mod, lookup_pc)) {
        int lineno = 0;
        if (const char* file = dwfl_lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr)) {
          f.file = file;
          if (lineno > 0) f.line = lineno;
        }
      }
      // Inlined calls become frames of their own, innermost first, as in gdb's bt.
      Dwarf_Addr bias = 0;
      Dwarf_Die* cudie = dwfl_module_addrdie(mod, lookup_pc, &bias);
      Dwarf_Die* scopes = nullptr;
      int n = cudie ? dwarf_getscopes(cudie, lookup_pc - bias, &scopes) : 0;
      StackFrame current = f;
      for (int i = 0; i < n; ++i) {
        if (dwarf_tag(&scopes[i]) != DW_TAG_inlined_subroutine) continue;
        current.function = dieFunctionName(&scopes[i]);
        frames.push_back(current);
        current.file.clear();
        current.line.reset();
        callSite(cudie, &scopes[i], current);
        current.function = f.function;
      }
      free(scopes);
      f.file = current.file;
      f.line = current.line;
    }
  }
  frames.push_back(f);
  symbols_.emplace(lookup_pc, frames);
  return frames;
}

UnwoundStack RemoteUnwinder::unwind(pid_t tid, Deadline deadline, size_t max_frames) {
  if (dwfl_ == nullptr) {
    Expected<Dwfl*> dwfl = openProcess(pid_);
    if (!dwfl) return UnwoundStack{{}, dwfl.error()};
    dwfl_ = *dwfl;
  }
  UnwindWalk walk{this, {}, deadline, max_frames};
  auto on_frame = [](Dwfl_Frame* frame, void* arg) -> int {
    auto* w = static_cast<UnwindWalk*>(arg);
    Dwarf_Addr pc = 0;
    bool activation = false;
    if (!dwfl_frame_pc(frame, &pc, &activation)) return DWARF_CB_ABORT;
    w->pcs.emplace_back(pc, activation);
    if (w->pcs.size() >= w->max_frames) return DWARF_CB_ABORT;
    if (Clock::now() >= w->deadline) {
      w->timed_out = true;
      return DWARF_CB_ABORT;
    }
    return DWARF_CB_OK;
  };
  int rc = dwfl_getthread_frames(dwfl_, tid, on_frame, &walk);
  UnwoundStack out;
  if (walk.timed_out) out.error = "unwind stopped at the deadline";
  else if (walk.pcs.size() >= max_frames) out.error = fmt::format("stack deeper than {} frames", max_frames);
  else if (rc == -1 && walk.pcs.empty()) {
    out.error = "unwind failed: " + dwflError();
    // libdwfl 0.188 keeps the thread "attached" when reading its registers failed (it
    // died meanwhile) and asserts on the next thread: start the next one afresh.
    dwfl_end(dwfl_);
    dwfl_ = nullptr;
  }
  // rc == -1 after some frames is the usual end of a stack without an outermost marker.
  for (auto [pc, activation] : walk.pcs) {
    for (StackFrame& f : symbolize(pc, activation ? pc : pc - 1)) out.frames.push_back(std::move(f));
  }
  return out;
}

}  // namespace hangwatch::forensics
