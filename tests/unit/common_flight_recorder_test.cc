// PyTorch's Flight Recorder dumps, read as plain data and never executed.
#include "hangwatch/common/flight_recorder.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

using namespace hangwatch;

namespace {

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(HANGWATCH_FIXTURES_DIR) + "/flight-recorder/" + name, std::ios::binary);
  REQUIRE(in);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("AFlightRecorderDumpOfTorch215ReadsAsPythonsPickleReadsIt") {
  auto data = readPickledData(fixture("torch-2.15-dead-link-rank0.pkl"));
  REQUIRE(data.ok());
  CHECK(*data == nlohmann::json::parse(fixture("torch-2.15-dead-link-rank0.json")));
}

TEST_CASE("AFlightRecorderDumpNamesItsGroupsTheirProgressAndEachEntrysCallSite") {
  auto fr = flightRecorderFromPickle(fixture("torch-2.15-dead-link-rank0.pkl"));
  REQUIRE(fr.ok());
  CHECK(fr->version == "2.10");
  REQUIRE(fr->groups.count("0"));
  const FlightRecorderGroup& g = fr->groups.at("0");
  CHECK(g.desc == "default_pg");
  CHECK(g.ranks == "[0, 1]");
  CHECK(g.last_enqueued == 20);
  CHECK(g.last_completed == 18);
  REQUIRE(fr->entries.size() == 21);
  const FlightRecorderEntry& last = fr->entries.back();
  CHECK(last.state == "scheduled");
  CHECK(last.pg_desc == "default_pg");
  CHECK(last.collective_seq_id == 21);
  CHECK(last.profiling_name.find("all_reduce") != std::string::npos);
  CHECK(last.input_numel == 1);
  CHECK(last.input_dtype == "Float");
  // DDP's gradient bucket the dead link stopped: 65792 float32, 263168 bytes as NCCL counts them.
  const FlightRecorderEntry& bucket = fr->entries[fr->entries.size() - 2];
  CHECK(bucket.input_numel * flightRecorderDtypeBytes(bucket.input_dtype) == 263168);
  REQUIRE(last.frames.size() >= 3);
  CHECK(last.frames[0].name == "all_reduce");  // innermost first
  CHECK(last.frames[2].filename.find("torch_ddp/train.py") != std::string::npos);
}

TEST_CASE("APickleThatWouldImportOrCallAnythingIsRefusedNotRun") {
  // pickle.dumps of os.system("echo") in protocol 0 (GLOBAL + REDUCE) and 4 (STACK_GLOBAL).
  const std::string protocol0 = "cos\nsystem\n(S'echo'\ntR.";
  const std::string protocol4("\x80\x04\x95\x1f\x00\x00\x00\x00\x00\x00\x00\x8c\x05posix\x94\x8c\x06system\x94\x93\x94"
                              "\x8c\x04" "echo\x94\x85\x94R\x94.",
                              42);
  for (const std::string& bytes : {protocol0, protocol4}) {
    auto r = readPickledData(bytes);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error(), Catch::Contains("refused pickle opcode"));
  }
  auto fr = flightRecorderFromPickle(protocol4);
  REQUIRE_FALSE(fr.ok());
}

TEST_CASE("ATruncatedOrForeignPickleIsAnErrorNotACrash") {
  const std::string whole = fixture("torch-2.15-dead-link-rank0.pkl");
  for (size_t cut : {size_t{0}, size_t{1}, size_t{2}, whole.size() / 2, whole.size() - 1})
    CHECK_FALSE(readPickledData(std::string_view(whole).substr(0, cut)).ok());
  // A pickle of other plain data is read, but is no Flight Recorder dump.
  auto other = flightRecorderFromPickle(std::string("\x80\x04]\x94(K\x01K\x02" "e.", 11));
  REQUIRE_FALSE(other.ok());
  CHECK_THAT(other.error(), Catch::Contains("not a Flight Recorder dump"));
}
