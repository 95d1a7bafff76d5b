#pragma once
// ranks/rNNNNN.forensics.json read with simdjson On-Demand, without building a JSON
// document: the same ForensicsDump as hangwatch::forensicsDumpFromText gives for what the
// collector writes, ~10x faster, which a report over 16,384 ranks needs (~2 GB of JSON).
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "hangwatch/common/expected.h"
#include "hangwatch/common/forensics_dump.h"
#include "hangwatch/stackmerge/stack_table.h"

namespace hangwatch::dumpio {

struct FastReadOptions {
  // Leaves ThreadStack::native_frames/python_frames empty without reading them: the report
  // uses only the merged frames, and the raw ones are most of a dump's bytes.
  bool skip_raw_frames = false;
  // When both are set, each thread's merged frames are interned into `stacks` and not kept:
  // ThreadStack::frames stays empty and thread i's stack is (*stack_ids)[i] (cleared first).
  // A report over 16,384 ranks keeps a few hundred distinct stacks instead of 8 M frames.
  stackmerge::StackTable* stacks = nullptr;
  std::vector<uint32_t>* stack_ids = nullptr;
};

// Bytes that must be readable after the text given to forensicsDumpFromPaddedText
// (simdjson's SIMDJSON_PADDING; the reader checks they agree).
inline constexpr size_t kFastReaderPadding = 64;

// Tolerant like the common reader (both follow the dump's field list): missing or null fields keep their defaults, unknown
// fields are skipped, a present field of the wrong type or broken JSON is an error.
// Copies `text` into a padded buffer first.
Expected<ForensicsDump> forensicsDumpFromTextFast(std::string_view text, FastReadOptions options = {});

// The same without the copy: `text.data()` must have kFastReaderPadding readable bytes
// after `text.size()` (their values do not matter).
Expected<ForensicsDump> forensicsDumpFromPaddedText(std::string_view text, FastReadOptions options = {});

}  // namespace hangwatch::dumpio
