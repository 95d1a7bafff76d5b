#pragma once
// TRIGGER.beacon: a file that exists from a job's start and grows one line when the job
// triggers and one when every rank's dumps are done. Why a file whose content changes rather
// than a stat() of TRIGGER.json: an NFS client caches a failed lookup (a negative dentry) and
// a file's attributes for up to a minute (acdirmax/acregmax), so a stat() may keep saying
// "no TRIGGER.json" long after another node created it. open() of an existing file is
// covered by close-to-open consistency: the client revalidates its attributes with the
// server on every open, and a changed size throws away cached data, so the read that
// follows sees what a writer wrote and closed before.
#include <cstdint>
#include <string>

#include "hangwatch/common/expected.h"

namespace hangwatch {

struct BeaconState {
  bool triggered = false;
  bool complete = false;
  int suspected_episode = 0;  // the latest early warning announced (0: none)
  int64_t size = 0;  // bytes in the file
};

class TriggerBeacon {
 public:
  explicit TriggerBeacon(std::string job_dir);

  // One open()+read()+close(); creates the file (and the job directory) when missing.
  // Only lines after the first `base` bytes count.
  Expected<BeaconState> read(int64_t base);
  // Appends one line (a '\n' is added), flushed before close.
  Expected<bool> append(const std::string& line);
  // stat() of TRIGGER.json: catches triggers made without the beacon (older tools, by hand).
  bool triggerFileExists() const;
  const std::string& path() const { return path_; }

 private:
  std::string job_dir_;
  std::string path_;
  std::string trigger_path_;
  bool exists_ = false;
};

// The lines the beacon holds.
std::string beaconTriggerLine(int rank, const std::string& host, int64_t pid, double time_unix_s);
std::string beaconCompleteLine(int ranks_done, int ranks_given_up, double time_unix_s);
std::string beaconSuspectLine(int episode, int rank, const std::string& host, int64_t pid, double time_unix_s);
// Parses the complete lines of `text` from offset `base` on.
BeaconState parseBeacon(const std::string& text, int64_t base);

}  // namespace hangwatch
