#pragma once
// ncclUniqueId of simnccl: the name of the communicator's shared-memory segment.
#include <nccl.h>

#include <string>

#include "hangwatch/common/expected.h"

namespace simnccl {

ncclUniqueId makeUniqueId();
// Derived ids (ncclCommSplit) are deterministic so every member computes the same one.
ncclUniqueId derivedUniqueId(const std::string& parent_name, const std::string& suffix);
hangwatch::Expected<std::string> segmentNameFromId(const ncclUniqueId& id);

}  // namespace simnccl
