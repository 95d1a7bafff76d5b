#pragma once
// Who this process is in the job, from the launcher's environment (DESIGN.md §4):
// RANK/LOCAL_RANK/WORLD_SIZE, OMPI_COMM_WORLD_*, SLURM_PROCID/SLURM_LOCALID, PMI_RANK,
// in that order.
#include <functional>
#include <optional>
#include <string>

namespace hangwatch {

struct RankIdentity {
  std::optional<int> rank;
  std::optional<int> local_rank;
  std::optional<int> world_size;
  std::string source;  // which launcher variables supplied the rank, e.g. "OMPI_COMM_WORLD_RANK"
};

using EnvLookup = std::function<const char*(const char*)>;

// The variable's value from `env` (getenv when empty); null when unset or empty.
const char* envValue(const EnvLookup& env, const char* name);

// `env` defaults to getenv; tests pass their own.
RankIdentity detectRankIdentity(const EnvLookup& env = nullptr);

// This machine's name as every dump records it (gethostname); "" when it cannot be had.
std::string hostName();

}  // namespace hangwatch
