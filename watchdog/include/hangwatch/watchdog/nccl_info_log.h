#pragma once
// NCCL's own INFO lines say which NIC each network connection uses: at connection set-up
// src/transport/net.cc prints "Channel 02/0 : 3[3] -> 4[0] [send] via NET/IB/3" (the proxy
// connection's net device), and the net's init names the devices ("NET/IB : Using
// [0]mlx5_0:1/IB ..."). With the debugger phase off that is the only source of a NIC a GPU
// job has, so the watchdog makes sure the lines are written somewhere it can read them, and
// puts this process's into its snapshot (common/watchdog_snapshot.h SnapshotNcclLog).
//
// A job that leaves NCCL_DEBUG unset sees nothing from NCCL: the watchdog then sets
// NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET and an NCCL_DEBUG_FILE of its own, node-local,
// at library load (before NCCL reads them), so the job's output is unchanged. A job that set
// NCCL_DEBUG itself keeps its choice: its NCCL_DEBUG_FILE is read where it has one.
// HANGWATCH_NCCL_INFO=0 leaves NCCL's logging alone.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hangwatch/common/nccl_conf.h"
#include "hangwatch/common/watchdog_snapshot.h"

namespace hangwatch::watchdog {

struct NcclInfoLogChoice {
  std::vector<std::pair<std::string, std::string>> set_env;  // to set before NCCL reads its environment
  std::string file_pattern;  // NCCL_DEBUG_FILE, absolute, as NCCL will expand it; empty: no file to read
  bool owned = false;        // the watchdog asked for it (its file goes when the process ends without a hang)
  std::string unread;        // why there is no file to read; empty when there is
};

// `node_dir` is where the watchdog's own file goes (made here; unusable: no file, and why).
NcclInfoLogChoice chooseNcclInfoLog(const EnvLookup& env, const std::vector<std::string>& conf_files,
                                    const std::string& node_dir, const std::string& cwd);

// NCCL_DEBUG_FILE as NCCL 2.28 expands it (src/debug.cc ncclDebugInit): %h the host name up
// to its first '.', %p the pid, %% one '%', any other %x kept as it is.
std::string expandNcclDebugFile(const std::string& pattern, const std::string& host, long pid);

// The lines of `path` that process `pid` wrote (NCCL's "host:pid:tid [dev] NCCL INFO " prefix)
// and that say which NIC a connection uses: the net's devices, communicator inits, NET
// connections. At most `max_bytes` of the file are read (`truncated` says when it had more).
SnapshotNcclLog readNcclInfoLines(const std::string& path, long pid, size_t max_bytes = 32u << 20);

// The choice made at library load (watchdog/nccl_info_capture.cc); none made: nothing to read.
void setNcclInfoLogChoice(NcclInfoLogChoice choice);
// What a snapshot carries: this process's lines, or why there are none. Marks the file kept.
std::optional<SnapshotNcclLog> ncclInfoLogForSnapshot();
// At the process's end: the watchdog's own file goes unless a snapshot read it.
void removeOwnNcclInfoLog();

}  // namespace hangwatch::watchdog
