#include "hangwatch/forensics/python/code_line_table.h"

namespace hangwatch::forensics {

std::optional<int> lineFromLineTable310(const std::string& table, int first_line, uint64_t byte_offset) {
  int line = first_line;
  uint64_t end = 0;
  for (size_t i = 0; i + 1 < table.size(); i += 2) {
    const auto sdelta = static_cast<unsigned char>(table[i]);
    const auto ldelta = static_cast<signed char>(table[i + 1]);
    const uint64_t start = end;
    end += sdelta;
    // -128 marks a range without a line; the running line stays as it was.
    if (ldelta != -128) line += ldelta;
    if (byte_offset >= start && byte_offset < end) {
      if (ldelta == -128) return std::nullopt;
      return line;
    }
  }
  return std::nullopt;
}

namespace {

class LocationReader {
 public:
  explicit LocationReader(const std::string& t) : t_(t) {}
  bool done() const { return pos_ >= t_.size(); }
  unsigned byte() { return done() ? 0 : static_cast<unsigned char>(t_[pos_++]); }
  // 6-bit groups, low group first, 0x40 says another group follows.
  uint64_t varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64 && !done(); shift += 6) {
      const unsigned b = byte();
      value |= static_cast<uint64_t>(b & 0x3f) << shift;
      if ((b & 0x40) == 0) break;
    }
    return value;
  }
  int64_t svarint() {
    const uint64_t v = varint();
    return (v & 1) ? -static_cast<int64_t>(v >> 1) : static_cast<int64_t>(v >> 1);
  }
  // Entries start with a byte whose top bit is set.
  void skipToEntry() {
    while (!done() && (static_cast<unsigned char>(t_[pos_]) & 0x80) == 0) ++pos_;
  }

 private:
  const std::string& t_;
  size_t pos_ = 0;
};

}  // namespace

std::optional<int> lineFromLocationTable(const std::string& table, int first_line, uint64_t unit_offset) {
  LocationReader r(table);
  int64_t line = first_line;
  uint64_t addr = 0;
  while (!r.done()) {
    const unsigned head = r.byte();
    const unsigned code = (head >> 3) & 0x0f;
    const uint64_t length = (head & 0x07) + 1;
    bool has_line = true;
    if (code == 15) {
      has_line = false;
    } else if (code == 14) {
      line += r.svarint();
      r.varint();
      r.varint();
      r.varint();
    } else if (code == 13) {
      line += r.svarint();
    } else if (code >= 10) {
      line += code - 10;
      r.byte();
      r.byte();
    } else {
      r.byte();
    }
    if (unit_offset >= addr && unit_offset < addr + length) {
      if (!has_line) return std::nullopt;
      return static_cast<int>(line);
    }
    addr += length;
    r.skipToEntry();
  }
  return std::nullopt;
}

}  // namespace hangwatch::forensics
