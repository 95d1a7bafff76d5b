#pragma once
// A communicator's rank, size and device, asked of NCCL once it is ready. Split and
// shrink children are registered before NCCL has them, and asking a communicator that
// is still initializing (non-blocking, or created inside a group) makes NCCL print a
// WARN line into the user's log (ncclCommEnsureReady in NCCL's init.cc).
#include <cstdint>
#include <map>
#include <string>

#include "hangwatch/watchdog/comm_table.h"

namespace hangwatch::watchdog {

// Fills in what `entry` lacks; false while the communicator is still initializing.
// Called on a thread that is using the communicator (its creation, or the next
// operation on it), never from the poller: a communicator the program destroyed
// must not be touched.
bool completeCommIdentity(CommEntry& entry);

class NcclCommIds;
// Ties NCCL's ids that arrived off the creating thread to communicators that still
// lack one: a note goes to an entry only when it is the one note, and the entry the one
// entry without an id, of that rank and size. Safe from the poller (no NCCL call).
void tieNcclIds(CommTable& comms, NcclCommIds& ids);

// NCCL's asynchronous error of each live, ready communicator, by handle: only those that
// have one ("ncclRemoteError", ...). ncclCommGetAsyncError reads two atomics and takes no
// lock (src/init.cc), and NCCL documents it for polling from another thread, as PyTorch's
// watchdog does; a communicator the program is ending is skipped (CommTable::forEachLive).
// NCCL's proxy stores there what failed it, e.g. a network peer that closed its connection
// (socketProgress: "Connection closed by remote peer") or stopped answering (IB: a
// completion with an error once the retries ran out), both ncclRemoteError.
std::map<uintptr_t, std::string> asyncErrors(CommTable& comms);

// "ncclRemoteError" for ncclRemoteError (nccl.h's names); "ncclResult <n>" for one it lacks.
std::string ncclResultName(int result);

}  // namespace hangwatch::watchdog
