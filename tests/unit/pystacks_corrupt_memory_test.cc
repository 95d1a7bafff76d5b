#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <vector>

#include "hangwatch/forensics/python/process_memory.h"
#include "hangwatch/forensics/python/python_layout.h"
#include "hangwatch/forensics/python/python_stack_reader.h"

using hangwatch::forensics::ProcessMemory;
using hangwatch::forensics::PythonLayout;
using hangwatch::forensics::PythonStackReader;

namespace {

// A 3.11-shaped interpreter built in this process's own memory, read back
// through process_vm_readv on our own pid, so tests can break it on purpose.
class FakeInterpreter311 {
 public:
  FakeInterpreter311() : layout_(*hangwatch::forensics::pythonLayoutForMinor(11)) {
    put(type_, layout_.type_name, reinterpret_cast<uint64_t>(type_name_));
    makeString(name_, "step");
    makeString(file_, "train.py");
    put(linetable_, layout_.bytes_size, 0);
    put(code_, layout_.object_type, addr(type_));
    put(code_, layout_.code_name, addr(name_));
    put(code_, layout_.code_filename, addr(file_));
    put(code_, layout_.code_linetable, addr(linetable_));
    put(runtime_, layout_.runtime_interpreters_head, addr(interp_));
    put(interp_, layout_.interp_threads_head, addr(tstate_));
    put(tstate_, layout_.tstate_frame, addr(cframe_));
    put(tstate_, layout_.tstate_thread_id, 0x7f0000001000);
    put(cframe_, *layout_.cframe_current_frame, addr(inner_));
    for (auto* frame : {&inner_, &outer_}) put(*frame, layout_.frame_code, addr(code_));
    put(inner_, layout_.frame_previous, addr(outer_));
    reinterpret_cast<unsigned char*>(outer_.data())[*layout_.frame_is_entry] = 1;
  }

  static uint64_t addr(const std::vector<uint64_t>& block) { return reinterpret_cast<uint64_t>(block.data()); }
  static void put(std::vector<uint64_t>& block, uint64_t offset, uint64_t value) {
    std::memcpy(reinterpret_cast<char*>(block.data()) + offset, &value, sizeof(value));
  }

  auto read() {
    ProcessMemory memory(getpid());
    PythonStackReader reader(memory, layout_);
    return reader.readThreads(addr(runtime_));
  }

  PythonLayout layout_;
  std::vector<uint64_t> runtime_ = std::vector<uint64_t>(16), interp_ = std::vector<uint64_t>(256),
                        tstate_ = std::vector<uint64_t>(64), cframe_ = std::vector<uint64_t>(8),
                        inner_ = std::vector<uint64_t>(16), outer_ = std::vector<uint64_t>(16),
                        code_ = std::vector<uint64_t>(64), type_ = std::vector<uint64_t>(64),
                        name_ = std::vector<uint64_t>(16), file_ = std::vector<uint64_t>(16),
                        linetable_ = std::vector<uint64_t>(8);
  char type_name_[8] = "code";

 private:
  void makeString(std::vector<uint64_t>& block, const std::string& text) {
    const uint32_t compact_ascii_latin1 = (1u << 2) | (1u << 5) | (1u << 6);
    std::memcpy(reinterpret_cast<char*>(block.data()) + layout_.unicode_state, &compact_ascii_latin1, 4);
    put(block, layout_.unicode_length, text.size());
    std::memcpy(reinterpret_cast<char*>(block.data()) + layout_.unicode_ascii_size, text.data(), text.size());
  }
};

}  // namespace

TEST_CASE("WellFormedFakeInterpreterReadsBothFramesInOneEntryGroup") {
  FakeInterpreter311 fake;
  auto threads = fake.read();
  INFO((threads ? std::string() : threads.error()));
  REQUIRE(threads.ok());
  REQUIRE(threads->size() == 1);
  const auto& t = threads->front();
  REQUIRE(t.frames.size() == 2);
  CHECK(t.frames[0].function == "step");
  CHECK(t.frames[0].file == "train.py");
  CHECK(t.pthread_id == 0x7f0000001000);
  CHECK(t.eval_group_sizes == std::vector<size_t>{2});
}

TEST_CASE("CyclicFrameChainIsAnErrorNotAHang") {
  FakeInterpreter311 fake;
  FakeInterpreter311::put(fake.outer_, fake.layout_.frame_previous, FakeInterpreter311::addr(fake.inner_));
  auto threads = fake.read();
  REQUIRE_FALSE(threads.ok());
  CHECK(threads.error().find("frame chain") != std::string::npos);
}

TEST_CASE("CyclicThreadListIsAnError") {
  FakeInterpreter311 fake;
  FakeInterpreter311::put(fake.tstate_, fake.layout_.tstate_next, FakeInterpreter311::addr(fake.tstate_));
  auto threads = fake.read();
  REQUIRE_FALSE(threads.ok());
  CHECK(threads.error().find("thread state list") != std::string::npos);
}

TEST_CASE("FrameWhoseCodeIsNotACodeObjectIsAnError") {
  FakeInterpreter311 fake;
  std::strcpy(fake.type_name_, "dict");
  auto threads = fake.read();
  REQUIRE_FALSE(threads.ok());
  CHECK(threads.error().find("code object") != std::string::npos);
}

TEST_CASE("UnmappedInterpreterPointerIsAnError") {
  FakeInterpreter311 fake;
  FakeInterpreter311::put(fake.runtime_, fake.layout_.runtime_interpreters_head, 0x7ffffff00000ull & ~7ull);
  auto threads = fake.read();
  REQUIRE_FALSE(threads.ok());
  CHECK(threads.error().find("PyInterpreterState") != std::string::npos);
}

TEST_CASE("GarbageInstructionPointerGivesNoLineInsteadOfCrashing") {
  FakeInterpreter311 fake;
  FakeInterpreter311::put(fake.inner_, fake.layout_.frame_instr, ~0ull);
  auto threads = fake.read();
  REQUIRE(threads.ok());
  CHECK_FALSE(threads->front().frames[0].line.has_value());
}
