#pragma once
// PyTorch's Flight Recorder dump of the rank being collected, kept with the job's dumps
// (DESIGN.md §4): PyTorch writes it on the rank's node when its watchdog times out, to
// TORCH_FR_DUMP_TEMP_FILE (older: TORCH_NCCL_DEBUG_INFO_TEMP_FILE; default /tmp/nccl_trace_rank_)
// followed by the rank (RANK), both read from the process's environment. Copied as it is (never
// read here) into ranks/rNNNNN.flight_recorder.pkl; only a file written since the process
// started (not a stale one of an earlier job on the node), at most 64 MiB. Recent PyTorch records
// by default (a 2000-entry buffer); TORCH_FR_BUFFER_SIZE=0 turns it off.
#include <sys/types.h>

#include <string>

#include "hangwatch/common/forensics_dump.h"

namespace hangwatch::forensics {

// The "flight_recorder" phase of `dump`: copied, skipped (and why), or failed.
void copyFlightRecorder(pid_t pid, const std::string& job_dir, int rank, ForensicsDump& dump);

}  // namespace hangwatch::forensics
