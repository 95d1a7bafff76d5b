#pragma once
// ncclUniqueId of simnccl: the name of the communicator's shared-memory segment.
#include <nccl.h>

#include <sys/types.h>

#include <optional>
#include <string>

#include "hangwatch/common/expected.h"

namespace simnccl {

ncclUniqueId makeUniqueId();
// Derived ids (ncclCommSplit) are deterministic so every member computes the same one.
ncclUniqueId derivedUniqueId(const std::string& parent_name, const std::string& suffix);
hangwatch::Expected<std::string> segmentNameFromId(const ncclUniqueId& id);
// The process that made the id with ncclGetUniqueId: NCCL's bootstrap root, a thread of that
// process, is what every rank connects to at init (bootstrap.cc). None for a derived id, whose
// members already know each other through their parent.
std::optional<pid_t> bootstrapRootPid(const std::string& segment_name);

}  // namespace simnccl
