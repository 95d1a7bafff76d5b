#pragma once
// The attempt folder of one launch is claimed once per node, not once per rank (issue #44
// item 4): at 16K ranks starting together, every rank reading ATTEMPT.json and the trigger on
// shared storage is a burst on the metadata server. The node's first rank of the launch claims
// it (attempt.h: claimAttempt, on the dump folder) and publishes the result on a small board in
// node-local shared memory; the launch's other ranks on the node take it from there, with no
// look-up of their own. A rank that finds the claimer gone, or the board unusable, claims for
// itself as before: the board only saves look-ups, it never decides anything.
//
// Which ranks share a board: same user, job folder, launch key (attempt.h: launchKeyFromEnv,
// which names each launch of mpirun, srun and torchrun), host, and parent process (the
// launcher's daemon on the node: orted/prted, slurmstepd, torchrun's agent; its pid and start
// time, so no later launch meets the board). Without a launch key nothing is shared.
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>

#include "hangwatch/common/attempt.h"
#include "hangwatch/common/expected.h"

namespace hangwatch::watchdog {

// What a claim gives the node's ranks: the launch's folder, and why the dump folder was given
// up when the claim had to go to the node-local fallback (empty when it was not).
struct NodeClaim {
  ClaimedAttempt attempt;
  std::string gave_up;
};

class LaunchClaim {
 public:
  // "<shm_dir>/hwclaim-<uid>-<hash>"; empty without a launch key (nothing is shared).
  static std::string boardPath(const std::string& shm_dir, const std::string& job_dir, const std::string& launch_key,
                               const std::string& host, pid_t parent);

  struct Outcome {
    NodeClaim claim;
    bool from_board = false;  // taken from another rank's claim: no look-up made here
  };
  // The claim of this launch on this node: from the board when a rank of it published one,
  // else `claim_here()` (published for the others). A rank that finds a claim under way waits
  // for it at most `wait_s`, or until the claiming process is gone, then claims for itself.
  // Without a usable board (`path` empty, no shared memory), claim_here() alone.
  static Outcome claimOnce(const std::string& path, const std::function<NodeClaim()>& claim_here, double wait_s);

  struct Layout;
};

}  // namespace hangwatch::watchdog
