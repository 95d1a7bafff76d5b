#include "hangwatch/forensics/python/python_object_reader.h"

#include <cstring>

namespace hangwatch::forensics {
namespace {

constexpr uint64_t kManagedDictFlag = 1u << 4;   // Py_TPFLAGS_MANAGED_DICT, 3.11+
constexpr uint64_t kInlineValuesFlag = 1u << 2;  // Py_TPFLAGS_INLINE_VALUES, 3.13+
constexpr int64_t kManagedDictOffset = -24;      // 3.11+: dict (3.12: dict-or-values) before the object
constexpr int64_t kManagedValuesOffset311 = -32;

void appendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x110000) {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += '?';
  }
}

}  // namespace

bool plausiblePythonPointer(uint64_t p) { return p >= 4096 && p < (1ull << 48) && (p & 7) == 0; }

std::optional<std::string> PythonObjectReader::unicode(uint64_t addr) {
  if (!plausiblePythonPointer(addr)) return std::nullopt;
  auto state = memory_.readValue<uint32_t>(addr + layout_.unicode_state);
  auto length = memory_.readValue<int64_t>(addr + layout_.unicode_length);
  if (!state || !length || *length < 0 || *length > 4096) return std::nullopt;
  const unsigned kind = (*state >> 2) & 7;
  const bool compact = (*state >> 5) & 1;
  const bool ascii = (*state >> 6) & 1;
  // Legacy (non-compact) strings keep their data elsewhere; code objects and names never use them.
  if (!compact || (kind != 1 && kind != 2 && kind != 4)) return std::nullopt;
  const uint64_t data = addr + (ascii ? layout_.unicode_ascii_size : layout_.unicode_compact_size);
  std::string raw(static_cast<size_t>(*length) * kind, '\0');
  if (!raw.empty() && !memory_.read(data, raw.data(), raw.size())) return std::nullopt;
  if (ascii) return raw;
  std::string out;
  for (size_t i = 0; i < static_cast<size_t>(*length); ++i) {
    uint32_t cp = 0;
    for (int b = static_cast<int>(kind) - 1; b >= 0; --b) cp = (cp << 8) | static_cast<unsigned char>(raw[kind * i + b]);
    appendUtf8(out, cp);
  }
  return out;
}

std::optional<std::string> PythonObjectReader::bytes(uint64_t addr, size_t limit) {
  if (!plausiblePythonPointer(addr)) return std::nullopt;
  auto size = memory_.readValue<int64_t>(addr + layout_.bytes_size);
  if (!size || *size < 0 || static_cast<uint64_t>(*size) > limit) return std::nullopt;
  std::string out(static_cast<size_t>(*size), '\0');
  if (!out.empty() && !memory_.read(addr + layout_.bytes_sval, out.data(), out.size())) return std::nullopt;
  return out;
}

std::optional<std::string> PythonObjectReader::typeName(uint64_t obj) {
  if (!plausiblePythonPointer(obj)) return std::nullopt;
  auto type = memory_.readPointer(obj + layout_.object_type);
  if (!type || !plausiblePythonPointer(*type)) return std::nullopt;
  if (auto it = type_names_.find(*type); it != type_names_.end()) return it->second;
  auto name_ptr = memory_.readPointer(*type + layout_.type_name);
  if (!name_ptr || *name_ptr == 0) return std::nullopt;
  std::string name;
  for (size_t i = 0; i < 128; ++i) {
    char c = 0;
    if (!memory_.read(*name_ptr + i, &c, 1)) return std::nullopt;
    if (c == '\0') break;
    name += c;
  }
  type_names_.emplace(*type, name);
  return name;
}

bool PythonObjectReader::hasTypeNamed(uint64_t obj, const std::string& name) {
  auto t = typeName(obj);
  return t && *t == name;
}

std::optional<uint64_t> PythonObjectReader::unsignedLong(uint64_t addr) {
  if (!hasTypeNamed(addr, "int")) return std::nullopt;
  auto header = memory_.readValue<int64_t>(addr + 16);
  if (!header) return std::nullopt;
  int64_t ndigits = 0;
  if (layout_.minor >= 12) {
    // lv_tag: digit count << 3 | sign (0 positive, 1 zero, 2 negative).
    if ((*header & 3) == 2) return std::nullopt;
    ndigits = static_cast<int64_t>(static_cast<uint64_t>(*header) >> 3);
  } else {
    if (*header < 0) return std::nullopt;
    ndigits = *header;
  }
  if (ndigits > 3) return std::nullopt;
  uint32_t digits[3] = {};
  if (ndigits > 0 && !memory_.read(addr + layout_.long_digits, digits, sizeof(uint32_t) * ndigits)) return std::nullopt;
  uint64_t value = 0;
  for (int64_t i = ndigits - 1; i >= 0; --i) value = (value << 30) | (digits[i] & 0x3fffffff);
  return value;
}

std::vector<std::pair<uint64_t, uint64_t>> PythonObjectReader::keysItems(uint64_t keys, uint64_t values) {
  std::vector<std::pair<uint64_t, uint64_t>> items;
  if (!plausiblePythonPointer(keys)) return items;
  uint64_t entries = 0, entry_size = 24, key_at = 8, value_at = 16;
  int64_t nentries = 0;
  if (layout_.minor == 10) {
    auto size = memory_.readValue<int64_t>(keys + 8);
    auto n = memory_.readValue<int64_t>(keys + 32);
    if (!size || !n || *size <= 0 || *size > (1 << 20)) return items;
    const uint64_t width = *size <= 0xff ? 1 : *size <= 0xffff ? 2 : *size <= 0xffffffffLL ? 4 : 8;
    entries = keys + 40 + static_cast<uint64_t>(*size) * width;
    nentries = *n;
  } else {
    uint8_t header[3];
    auto n = memory_.readValue<int64_t>(keys + 24);
    if (!n || !memory_.read(keys + 8, header, sizeof(header)) || header[1] > 32) return items;
    entries = keys + 32 + (uint64_t{1} << header[1]);
    // DICT_KEYS_GENERAL entries carry the hash; unicode and split entries do not.
    if (header[2] != 0) {
      entry_size = 16;
      key_at = 0;
      value_at = 8;
    }
    nentries = *n;
  }
  if (nentries <= 0 || nentries > static_cast<int64_t>(kMaxDictEntries)) return items;
  std::vector<uint64_t> raw(static_cast<size_t>(nentries) * entry_size / 8);
  if (!memory_.read(entries, raw.data(), raw.size() * 8)) return items;
  std::vector<uint64_t> split_values;
  if (values != 0) {
    // 3.13's PyDictValues starts with capacity/size/embedded/valid bytes.
    const uint64_t first = values + (layout_.minor >= 13 ? 8 : 0);
    split_values.resize(static_cast<size_t>(nentries));
    if (!memory_.read(first, split_values.data(), split_values.size() * 8)) return items;
  }
  for (int64_t i = 0; i < nentries; ++i) {
    const uint64_t key = raw[(i * entry_size + key_at) / 8];
    const uint64_t value = values != 0 ? split_values[i] : raw[(i * entry_size + value_at) / 8];
    if (key != 0 && value != 0) items.emplace_back(key, value);
  }
  return items;
}

std::vector<std::pair<uint64_t, uint64_t>> PythonObjectReader::dictItems(uint64_t dict) {
  if (!hasTypeNamed(dict, "dict")) return {};
  auto keys = memory_.readPointer(dict + layout_.dict_keys);
  auto values = memory_.readPointer(dict + layout_.dict_values);
  if (!keys || !values) return {};
  return keysItems(*keys, *values);
}

std::optional<uint64_t> PythonObjectReader::findKey(const std::vector<std::pair<uint64_t, uint64_t>>& items,
                                                    const std::string& key) {
  for (const auto& [k, v] : items) {
    auto length = memory_.readValue<int64_t>(k + layout_.unicode_length);
    if (!length || *length != static_cast<int64_t>(key.size())) continue;
    if (auto s = unicode(k); s && *s == key) return v;
  }
  return std::nullopt;
}

std::optional<uint64_t> PythonObjectReader::dictGet(uint64_t dict, const std::string& key) {
  return findKey(dictItems(dict), key);
}

std::optional<uint64_t> PythonObjectReader::attribute(uint64_t obj, const std::string& name) {
  if (!plausiblePythonPointer(obj)) return std::nullopt;
  auto type = memory_.readPointer(obj + layout_.object_type);
  if (!type || !plausiblePythonPointer(*type)) return std::nullopt;
  auto flags = memory_.readValue<uint64_t>(*type + layout_.type_flags);
  if (!flags) return std::nullopt;
  if (layout_.minor >= 11 && (*flags & kManagedDictFlag)) {
    auto slot = memory_.readPointer(obj + kManagedDictOffset);
    if (!slot) return std::nullopt;
    uint64_t dict = *slot, values = 0;
    if (layout_.minor == 11 && dict == 0) values = memory_.readPointer(obj + kManagedValuesOffset311).value_or(0);
    if (layout_.minor == 12 && (dict & 1)) {
      values = dict + 1;  // tagged: the slot holds values - 1
      dict = 0;
    }
    if (layout_.minor >= 13 && dict == 0 && (*flags & kInlineValuesFlag)) {
      auto basicsize = memory_.readValue<int64_t>(*type + layout_.type_basicsize);
      auto valid = basicsize ? memory_.readValue<uint8_t>(obj + *basicsize + 3) : std::nullopt;
      if (valid && *valid) values = obj + *basicsize;
    }
    if (dict != 0) return dictGet(dict, name);
    if (values == 0) return std::nullopt;
    auto keys = memory_.readPointer(*type + layout_.heaptype_cached_keys);
    if (!keys) return std::nullopt;
    return findKey(keysItems(*keys, values), name);
  }
  auto dictoffset = memory_.readValue<int64_t>(*type + layout_.type_dictoffset);
  if (!dictoffset || *dictoffset <= 0 || *dictoffset > 4096) return std::nullopt;
  auto dict = memory_.readPointer(obj + *dictoffset);
  if (!dict || *dict == 0) return std::nullopt;
  return dictGet(*dict, name);
}

}  // namespace hangwatch::forensics
