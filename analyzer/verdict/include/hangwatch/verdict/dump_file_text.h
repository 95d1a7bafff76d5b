#pragma once
// One rank file's text with dumpio::kFastReaderPadding readable bytes after it, so simdjson
// reads it in place: one read() into a buffer the loader thread reuses for every file. (Mapping
// the files instead measured the same at 16,384 ranks: page faults and unmapping cost what the
// copy does, so the simpler read stays.)
#include <cstddef>
#include <string>
#include <string_view>

namespace hangwatch::verdict {

class DumpFileText {
 public:
  // False when the file cannot be opened; a file that cannot be read gives empty text.
  bool open(const std::string& path);
  // Valid until the next open().
  std::string_view text() const { return {buffer_.data(), size_}; }

 private:
  std::string buffer_;
  size_t size_ = 0;
};

}  // namespace hangwatch::verdict
