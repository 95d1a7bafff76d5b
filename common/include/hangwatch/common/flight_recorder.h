#pragma once
// PyTorch's Flight Recorder dumps (TORCH_FR_BUFFER_SIZE / TORCH_NCCL_TRACE_BUFFER_SIZE,
// written to TORCH_FR_DUMP_TEMP_FILE<rank> when its watchdog times out), read as evidence,
// never required (DESIGN.md §4). The file is a pickle of plain data (dicts, lists, strings,
// numbers): it is read by a pickle *data* reader that builds only those, and refuses every
// opcode that would import or call anything (GLOBAL, REDUCE, BUILD, ...), so no file from
// shared storage is ever executed. Checked against torch 2.15's dumps (format "2.10":
// FlightRecorderDetail.hpp's dump_entries; the fixture tests/fixtures/flight-recorder/).
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "hangwatch/common/expected.h"

namespace hangwatch {

// A pickle of plain data as JSON: dict keys become strings, tuples arrays, bytes hex strings.
Expected<nlohmann::json> readPickledData(std::string_view bytes);

struct FlightRecorderFrame {
  std::string name;
  std::string filename;
  int line = 0;
};

struct FlightRecorderEntry {
  int64_t record_id = -1;
  std::string pg_id;
  std::string pg_name;  // process_group[0]: the group's name ("0", "1", ...)
  std::string pg_desc;  // process_group[1]: its description ("default_pg", "tp_group", ...)
  int64_t collective_seq_id = 0;
  int64_t p2p_seq_id = 0;
  bool is_p2p = false;
  std::string profiling_name;  // "nccl:all_reduce"
  std::string state;           // "scheduled", "started", "completed"
  int64_t input_numel = 0;     // elements of every input tensor together (input_sizes)
  std::string input_dtype;     // the first input's ("Float", "BFloat16", ...)
  std::vector<FlightRecorderFrame> frames;  // innermost first
};

struct FlightRecorderGroup {
  std::string name;
  std::string desc;
  std::string ranks;  // as PyTorch writes it: "[0, 1, 2, 3]"
  std::optional<int64_t> last_enqueued;
  std::optional<int64_t> last_started;
  std::optional<int64_t> last_completed;
};

struct FlightRecorderDump {
  std::string version;
  std::map<std::string, FlightRecorderGroup> groups;  // by pg_id
  std::vector<FlightRecorderEntry> entries;
};

Expected<FlightRecorderDump> flightRecorderFromPickle(std::string_view bytes);

// Bytes of one element of a Flight Recorder dtype name (c10's ScalarType names); 0 if unknown.
int flightRecorderDtypeBytes(const std::string& dtype);

}  // namespace hangwatch
