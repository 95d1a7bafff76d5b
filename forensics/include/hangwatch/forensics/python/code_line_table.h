#pragma once
// Source line of an instruction offset, decoded from a code object's co_linetable.
#include <cstdint>
#include <optional>
#include <string>

namespace hangwatch::forensics {

// 3.10 (PEP 626): (bytecode delta, signed line delta) byte pairs; `byte_offset` in bytes.
std::optional<int> lineFromLineTable310(const std::string& table, int first_line, uint64_t byte_offset);

// 3.11+ location table: variable-length entries covering code units; `unit_offset` in code units.
std::optional<int> lineFromLocationTable(const std::string& table, int first_line, uint64_t unit_offset);

}  // namespace hangwatch::forensics
