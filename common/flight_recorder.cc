#include "hangwatch/common/flight_recorder.h"

#include <cstring>

#include <fmt/format.h>

namespace hangwatch {
namespace {

using nlohmann::json;

// The opcodes of pickle protocols 2-5 that build plain data (Lib/pickletools.py); every other
// one is refused by name.
class PickleDataReader {
 public:
  explicit PickleDataReader(std::string_view bytes) : in_(bytes) {}

  Expected<json> read() {
    while (pos_ < in_.size()) {
      const auto op = static_cast<unsigned char>(in_[pos_++]);
      if (op == '.') {  // STOP
        if (stack_.size() != 1 || !marks_.empty()) return Error{"malformed pickle: STOP with a stack of " +
                                                                std::to_string(stack_.size())};
        return std::move(stack_.back());
      }
      if (auto step = apply(op); !step) return Error{step.error()};
    }
    return Error{"truncated pickle: no STOP"};
  }

 private:
  template <typename T>
  Expected<T> fixed() {
    if (in_.size() - pos_ < sizeof(T)) return Error{"truncated pickle"};
    T v;
    std::memcpy(&v, in_.data() + pos_, sizeof(T));  // little-endian, as pickle writes them
    pos_ += sizeof(T);
    return v;
  }
  Expected<std::string_view> span(uint64_t n) {
    if (in_.size() - pos_ < n) return Error{"truncated pickle"};
    std::string_view s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  Expected<json> pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) return Error{"malformed pickle: empty stack"};
    json v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  Expected<std::vector<json>> popMark() {
    if (marks_.empty()) return Error{"malformed pickle: no MARK"};
    std::vector<json> items(std::make_move_iterator(stack_.begin() + static_cast<long>(marks_.back())),
                            std::make_move_iterator(stack_.end()));
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
  }
  static std::string key(const json& k) { return k.is_string() ? k.get<std::string>() : k.dump(); }
  Expected<bool> setItems(std::vector<json> kv) {
    if (stack_.empty() || !stack_.back().is_object() || kv.size() % 2) return Error{"malformed pickle: SETITEMS"};
    for (size_t i = 0; i < kv.size(); i += 2) stack_.back()[key(kv[i])] = std::move(kv[i + 1]);
    return true;
  }
  Expected<bool> appendItems(std::vector<json> items) {
    if (stack_.empty() || !stack_.back().is_array()) return Error{"malformed pickle: APPENDS"};
    for (json& v : items) stack_.back().push_back(std::move(v));
    return true;
  }
  Expected<bool> push(Expected<json> v) {
    if (!v) return Error{v.error()};
    stack_.push_back(std::move(*v));
    return true;
  }
  Expected<json> text(uint64_t n) {
    auto s = span(n);
    if (!s) return Error{s.error()};
    return json(std::string(*s));
  }
  Expected<json> hexBytes(uint64_t n) {
    auto s = span(n);
    if (!s) return Error{s.error()};
    std::string hex;
    for (unsigned char c : *s) hex += fmt::format("{:02x}", c);
    return json(hex);
  }
  Expected<json> long1() {
    auto n = fixed<uint8_t>();
    if (!n) return Error{n.error()};
    auto s = span(*n);
    if (!s) return Error{s.error()};
    if (*n > 8) return json(nullptr);  // beyond 64 bits: nothing a Flight Recorder field holds
    int64_t v = 0;
    for (size_t i = 0; i < *n; ++i) v |= static_cast<int64_t>(static_cast<unsigned char>((*s)[i])) << (8 * i);
    if (*n > 0 && *n < 8 && ((*s)[*n - 1] & 0x80)) v -= int64_t{1} << (8 * *n);  // two's complement
    return json(v);
  }
  Expected<bool> memoGet(uint64_t index) {
    if (index >= memo_.size()) return Error{"malformed pickle: memo " + std::to_string(index) + " unset"};
    stack_.push_back(memo_[index]);
    return true;
  }
  Expected<bool> memoPut(uint64_t index) {
    if (stack_.empty()) return Error{"malformed pickle: memo of an empty stack"};
    if (index > (uint64_t{1} << 24)) return Error{"malformed pickle: memo index too large"};
    if (memo_.size() <= index) memo_.resize(index + 1);
    memo_[index] = stack_.back();
    return true;
  }
  template <typename T>
  Expected<uint64_t> index() {
    auto v = fixed<T>();
    if (!v) return Error{v.error()};
    return static_cast<uint64_t>(*v);
  }
  Expected<bool> tupleOf(size_t n) {
    if (stack_.size() < n) return Error{"malformed pickle: TUPLE"};
    json t = json::array();
    for (size_t i = stack_.size() - n; i < stack_.size(); ++i) t.push_back(std::move(stack_[i]));
    stack_.resize(stack_.size() - n);
    stack_.push_back(std::move(t));
    return true;
  }

  Expected<bool> apply(unsigned char op);

  std::string_view in_;
  size_t pos_ = 0;
  std::vector<json> stack_;
  std::vector<size_t> marks_;
  std::vector<json> memo_;
};

Expected<bool> PickleDataReader::apply(unsigned char op) {
  switch (op) {
    case 0x80: return fixed<uint8_t>() ? Expected<bool>(true) : Error{"truncated pickle"};  // PROTO
    case 0x95: return fixed<uint64_t>() ? Expected<bool>(true) : Error{"truncated pickle"};  // FRAME
    case '(': marks_.push_back(stack_.size()); return true;                                   // MARK
    case '}': stack_.push_back(json::object()); return true;                                  // EMPTY_DICT
    case ']': stack_.push_back(json::array()); return true;                                   // EMPTY_LIST
    case ')': stack_.push_back(json::array()); return true;                                   // EMPTY_TUPLE
    case 'N': stack_.push_back(nullptr); return true;                                         // NONE
    case 0x88: stack_.push_back(true); return true;                                           // NEWTRUE
    case 0x89: stack_.push_back(false); return true;                                          // NEWFALSE
    case 'J': { auto v = fixed<int32_t>(); return v ? push(json(*v)) : Error{v.error()}; }    // BININT
    case 'K': { auto v = fixed<uint8_t>(); return v ? push(json(*v)) : Error{v.error()}; }    // BININT1
    case 'M': { auto v = fixed<uint16_t>(); return v ? push(json(*v)) : Error{v.error()}; }   // BININT2
    case 0x8a: return push(long1());                                                          // LONG1
    case 'G': {                                                                               // BINFLOAT (big-endian)
      auto v = fixed<uint64_t>();
      if (!v) return Error{v.error()};
      uint64_t b = __builtin_bswap64(*v);
      double d;
      std::memcpy(&d, &b, sizeof d);
      return push(json(d));
    }
    case 0x8c: { auto n = index<uint8_t>(); return n ? push(text(*n)) : Error{n.error()}; }   // SHORT_BINUNICODE
    case 'X': { auto n = index<uint32_t>(); return n ? push(text(*n)) : Error{n.error()}; }   // BINUNICODE
    case 0x8d: { auto n = index<uint64_t>(); return n ? push(text(*n)) : Error{n.error()}; }  // BINUNICODE8
    case 'C': { auto n = index<uint8_t>(); return n ? push(hexBytes(*n)) : Error{n.error()}; }  // SHORT_BINBYTES
    case 'B': { auto n = index<uint32_t>(); return n ? push(hexBytes(*n)) : Error{n.error()}; }  // BINBYTES
    case 'q': { auto n = index<uint8_t>(); return n ? memoPut(*n) : Error{n.error()}; }      // BINPUT
    case 'r': { auto n = index<uint32_t>(); return n ? memoPut(*n) : Error{n.error()}; }     // LONG_BINPUT
    case 0x94: return memoPut(memo_.size());                                                  // MEMOIZE
    case 'h': { auto n = index<uint8_t>(); return n ? memoGet(*n) : Error{n.error()}; }      // BINGET
    case 'j': { auto n = index<uint32_t>(); return n ? memoGet(*n) : Error{n.error()}; }     // LONG_BINGET
    case 0x85: return tupleOf(1);                                                             // TUPLE1
    case 0x86: return tupleOf(2);                                                             // TUPLE2
    case 0x87: return tupleOf(3);                                                             // TUPLE3
    case 't': {                                                                               // TUPLE
      auto items = popMark();
      if (!items) return Error{items.error()};
      return push(json(std::move(*items)));
    }
    case 'a': {                                                                               // APPEND
      auto v = pop();
      if (!v) return Error{v.error()};
      return appendItems({std::move(*v)});
    }
    case 'e': { auto items = popMark(); return items ? appendItems(std::move(*items)) : Error{items.error()}; }  // APPENDS
    case 's': {                                                                               // SETITEM
      auto v = pop();
      if (!v) return Error{v.error()};
      auto k = pop();
      if (!k) return Error{k.error()};
      return setItems({std::move(*k), std::move(*v)});
    }
    case 'u': { auto kv = popMark(); return kv ? setItems(std::move(*kv)) : Error{kv.error()}; }  // SETITEMS
    default:
      return Error{fmt::format("refused pickle opcode 0x{:02x} at byte {}: only plain data (dicts, lists, strings, "
                               "numbers) is read, nothing that imports or calls",
                               op, pos_ - 1)};
  }
}

std::string str(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

std::optional<int64_t> integer(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}

FlightRecorderEntry entryFrom(const json& e) {
  FlightRecorderEntry out;
  out.record_id = integer(e, "record_id").value_or(-1);
  out.pg_id = str(e, "pg_id");
  if (auto pg = e.find("process_group"); pg != e.end() && pg->is_array() && pg->size() >= 2) {
    out.pg_name = (*pg)[0].is_string() ? (*pg)[0].get<std::string>() : (*pg)[0].dump();
    out.pg_desc = (*pg)[1].is_string() ? (*pg)[1].get<std::string>() : (*pg)[1].dump();
  }
  out.collective_seq_id = integer(e, "collective_seq_id").value_or(0);
  out.p2p_seq_id = integer(e, "p2p_seq_id").value_or(0);
  out.is_p2p = e.value("is_p2p", false);
  out.profiling_name = str(e, "profiling_name");
  out.state = str(e, "state");
  if (auto sizes = e.find("input_sizes"); sizes != e.end() && sizes->is_array()) {
    for (const json& shape : *sizes) {
      if (!shape.is_array()) continue;
      int64_t n = 1;
      for (const json& dim : shape) n *= dim.is_number_integer() ? dim.get<int64_t>() : 0;
      out.input_numel += n;
    }
  }
  if (auto types = e.find("input_dtypes"); types != e.end() && types->is_array() && !types->empty() &&
                                            (*types)[0].is_string())
    out.input_dtype = (*types)[0].get<std::string>();
  if (auto frames = e.find("frames"); frames != e.end() && frames->is_array()) {
    // PyTorch records the innermost frame first.
    for (const json& f : *frames)
      if (f.is_object()) out.frames.push_back({str(f, "name"), str(f, "filename"), static_cast<int>(integer(f, "line").value_or(0))});
  }
  return out;
}

}  // namespace

Expected<nlohmann::json> readPickledData(std::string_view bytes) { return PickleDataReader(bytes).read(); }

Expected<FlightRecorderDump> flightRecorderFromPickle(std::string_view bytes) {
  auto data = readPickledData(bytes);
  if (!data) return Error{data.error()};
  if (!data->is_object() || !data->contains("entries")) return Error{"not a Flight Recorder dump: no 'entries'"};
  FlightRecorderDump d;
  d.version = str(*data, "version");
  if (auto config = data->find("pg_config"); config != data->end() && config->is_object()) {
    for (const auto& [id, g] : config->items())
      if (g.is_object()) d.groups[id] = {str(g, "name"), str(g, "desc"), str(g, "ranks"), {}, {}, {}};
  }
  if (auto status = data->find("pg_status"); status != data->end() && status->is_object()) {
    for (const auto& [id, s] : status->items()) {
      if (!s.is_object()) continue;
      FlightRecorderGroup& g = d.groups[id];
      g.last_enqueued = integer(s, "last_enqueued_collective");
      g.last_started = integer(s, "last_started_collective");
      g.last_completed = integer(s, "last_completed_collective");
    }
  }
  if (const json& entries = (*data)["entries"]; entries.is_array())
    for (const json& e : entries)
      if (e.is_object()) d.entries.push_back(entryFrom(e));
  return d;
}

int flightRecorderDtypeBytes(const std::string& dtype) {
  static const std::map<std::string, int> bytes = {
      {"Double", 8}, {"Float", 4}, {"Half", 2}, {"BFloat16", 2}, {"Long", 8}, {"Int", 4}, {"Short", 2},
      {"Char", 1},   {"Byte", 1},  {"Bool", 1}, {"Float8_e4m3fn", 1}, {"Float8_e5m2", 1}, {"ComplexFloat", 8}};
  auto it = bytes.find(dtype);
  return it == bytes.end() ? 0 : it->second;
}

}  // namespace hangwatch
