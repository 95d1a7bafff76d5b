#pragma once
// NCCL's own debug log (src/debug.cc of v2.28.9-1), so that a program, or a tool reading
// NCCL_DEBUG_FILE, sees from simnccl the lines NCCL prints. Read once at first use, as
// ncclDebugInit does: NCCL_DEBUG (VERSION, WARN, INFO, ABORT, TRACE; unset: nothing),
// NCCL_DEBUG_SUBSYS (comma list, a leading '^' inverts; default INIT,BOOTSTRAP,ENV),
// NCCL_DEBUG_FILE (%h hostname up to its first '.', %p pid, %% a '%'; stdout when unset or
// when it cannot be opened), NCCL_DEBUG_TIMESTAMP_LEVELS (default WARN). Lines:
//   INFO  "<host>:<pid>:<tid> [<cudaDev>] NCCL INFO <msg>"
//   WARN  "\n[<time>] <host>:<pid>:<tid> [<cudaDev>] <file>:<line> NCCL WARN <msg>"
//   TRACE "<host>:<pid>:<tid> [<cudaDev>] <ms> <func>:<line> NCCL TRACE <msg>"
#include <cstdarg>
#include <cstdint>

namespace simnccl {

// ncclDebugLogLevel (src/include/nccl_common.h).
enum DebugLevel : int {
  kLogNone = 0,
  kLogVersion = 1,
  kLogWarn = 2,
  kLogInfo = 3,
  kLogAbort = 4,
  kLogTrace = 5,
};

// ncclDebugLogSubSys (src/include/nccl_common.h): NCCL's bit values.
namespace subsys {
inline constexpr uint64_t kInit = 0x1;
inline constexpr uint64_t kColl = 0x2;
inline constexpr uint64_t kP2p = 0x4;
inline constexpr uint64_t kShm = 0x8;
inline constexpr uint64_t kNet = 0x10;
inline constexpr uint64_t kGraph = 0x20;
inline constexpr uint64_t kTuning = 0x40;
inline constexpr uint64_t kEnv = 0x80;
inline constexpr uint64_t kAlloc = 0x100;
inline constexpr uint64_t kCall = 0x200;
inline constexpr uint64_t kProxy = 0x400;
inline constexpr uint64_t kNvls = 0x800;
inline constexpr uint64_t kBootstrap = 0x1000;
inline constexpr uint64_t kReg = 0x2000;
inline constexpr uint64_t kProfile = 0x4000;
inline constexpr uint64_t kRas = 0x8000;
inline constexpr uint64_t kAll = ~0ull;
}  // namespace subsys

// Whether a line of `level` under `flags` would be printed (NCCL's INFO/TRACE macros' test).
bool debugEnabled(int level, uint64_t flags);

// ncclDebugLog: [cudaDev] is the calling thread's current device. `filefunc` is what
// NCCL's macros pass: __FILE__ for WARN (NCCL's is relative to src/), __func__ otherwise.
void debugLog(int level, uint64_t flags, const char* filefunc, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));
void debugLogV(int level, uint64_t flags, const char* filefunc, int line, const char* fmt, va_list args);

// The line NCCL prints from a thread it first put on `cuda_dev` (cudaSetDevice(comm->cudaDev)
// in ncclCommInitRankFunc, ncclPrepareTasks and its preconnect jobs): simnccl prints them from
// threads whose current device may be another.
void debugLogOnDevice(int cuda_dev, int level, uint64_t flags, const char* filefunc, int line, const char* fmt, ...)
    __attribute__((format(printf, 6, 7)));

// ncclResetDebugInit: the next line reads the environment again (the old file is closed).
void resetDebugLog();

// showVersion (src/init.cc:604, called once per process at src/init.cc:1977): "NCCL version
// 2.28.9+cudaX.Y" as INFO at NCCL_DEBUG=INFO and above, as a bare VERSION line at VERSION and
// WARN, and then only on rank 0.
void showVersionOnce(int rank);

}  // namespace simnccl
