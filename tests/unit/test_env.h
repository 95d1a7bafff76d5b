#pragma once
// What unit tests share: a scratch directory and an environment of their own.
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>

#include <catch2/catch.hpp>

#include "hangwatch/common/rank_identity.h"

namespace test_support {

// Nanoseconds, the watchdog's and simgpu's time unit.
inline constexpr int64_t kMs = 1'000'000;
inline constexpr int64_t kSecond = 1'000'000'000;

// A fresh directory under /tmp, removed with everything in it when the test ends.
struct TempDir {
  std::string path;
  explicit TempDir(const std::string& prefix = "hangwatch-test") {
    std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

// An environment holding `vars` alone, for code that takes an EnvLookup instead of getenv.
inline hangwatch::EnvLookup envOf(std::map<std::string, std::string> vars) {
  auto shared = std::make_shared<const std::map<std::string, std::string>>(std::move(vars));
  return [shared](const char* name) -> const char* {
    auto it = shared->find(name);
    return it == shared->end() ? nullptr : it->second.c_str();
  };
}

// How many threads of this process carry `name` (/proc/self/task/*/comm).
inline int threadsNamed(const std::string& name) {
  int n = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string line;
    std::getline(comm, line);
    n += line == name;
  }
  return n;
}

}  // namespace test_support
