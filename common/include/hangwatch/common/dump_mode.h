#pragma once
// The file mode of everything hangwatch writes into a job folder on shared storage (dumps,
// state files, metrics, reports): HANGWATCH_DUMP_MODE, default 0640. Dumps hold stacks, host
// names and paths: readable by the job's group (the operations team), not by everyone.
// Folders get the same mode plus search (x) where it allows reading (0640 -> 0750).
#include <sys/types.h>

#include <string>

#include "hangwatch/common/expected.h"
#include "hangwatch/common/rank_identity.h"

namespace hangwatch {

constexpr mode_t kDefaultDumpMode = 0640;

// "0640", "640", "0660": octal, no bits above 0777.
Expected<mode_t> parseDumpMode(const std::string& text);

// From HANGWATCH_DUMP_MODE, read once; a malformed value keeps 0640 (`warning` says why).
mode_t dumpFileMode(std::string* warning = nullptr);
mode_t dumpDirMode();
// Tests and the CLI: fixes the mode from `env` instead (re-reads it).
void setDumpModeFromEnv(const EnvLookup& env, std::string* warning = nullptr);

// Gives an open file the dump mode (whatever the umask made of it at creation).
void applyDumpMode(int fd);
// Creates `dir` and its missing parents with the dump folder mode; existing ones are left alone.
Expected<bool> makeDumpDirs(const std::string& dir);

}  // namespace hangwatch
