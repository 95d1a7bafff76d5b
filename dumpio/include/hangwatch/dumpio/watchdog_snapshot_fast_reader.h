#pragma once
// ranks/rNNNNN.watchdog.json read with simdjson On-Demand, without building a JSON document:
// the same WatchdogSnapshot, and the same errors, as hangwatch::watchdogSnapshotFromJson (both
// follow the snapshot's field list), ~10x faster.
#include <string_view>

#include "hangwatch/common/expected.h"
#include "hangwatch/common/watchdog_snapshot.h"

namespace hangwatch::dumpio {

struct SnapshotReadOptions {
  // A snapshot without an identity object is an error (the report does not use it).
  bool require_identity = false;
};

// `text.data()` must have kFastReaderPadding readable bytes after `text.size()`.
Expected<WatchdogSnapshot> watchdogSnapshotFromPaddedText(std::string_view text, SnapshotReadOptions options = {});
// The same, copying `text` into a padded buffer first.
Expected<WatchdogSnapshot> watchdogSnapshotFromTextFast(std::string_view text, SnapshotReadOptions options = {});

}  // namespace hangwatch::dumpio
