// glibc_compat.cc's rebuilt functions against glibc's own, and a library linked like
// libhangwatch.so (fixtures/libc_only.cc) running on them inside this program.
#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <memory>
#include <string>

#include "hangwatch/watchdog/object_by_address.h"

using hangwatch::watchdog::findObjectByAddress;

#ifndef LIBC_ONLY_FIXTURE_LIBRARY
#error "LIBC_ONLY_FIXTURE_LIBRARY must name the fixture library"
#endif

namespace {

int aFunctionOfThisProgram() { return 0; }

}  // namespace

TEST_CASE("FindObjectByAddressFindsWhatGlibcsDlFindObjectFinds") {
  void* fixture = dlopen(LIBC_ONLY_FIXTURE_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(fixture != nullptr);
  volatile int on_stack = aFunctionOfThisProgram();
  auto on_heap = std::make_unique<int>(1);
  const void* in_objects[] = {reinterpret_cast<void*>(&aFunctionOfThisProgram), reinterpret_cast<void*>(&::getpid),
                              dlsym(fixture, "libc_only_fixture_run"), reinterpret_cast<void*>(&::dlopen)};
  for (const void* address : in_objects) {
    INFO("address " << address);
    dl_find_object ours{}, glibcs{};
    REQUIRE(_dl_find_object(const_cast<void*>(address), &glibcs) == 0);
    REQUIRE(findObjectByAddress(address, &ours) == 0);
    CHECK(ours.dlfo_eh_frame == glibcs.dlfo_eh_frame);
    CHECK(ours.dlfo_link_map == glibcs.dlfo_link_map);
    CHECK(ours.dlfo_map_start <= address);
    CHECK(address < ours.dlfo_map_end);
  }
  const void* in_no_object[] = {const_cast<const int*>(&on_stack), on_heap.get()};
  for (const void* address : in_no_object) {
    dl_find_object ours{}, glibcs{};
    CHECK(_dl_find_object(const_cast<void*>(address), &glibcs) == -1);
    CHECK(findObjectByAddress(address, &ours) == -1);
  }
  dlclose(fixture);
}

TEST_CASE("ALibraryOnTheCLibraryAloneThrowsWaitsAndReadsFilesBesideThisProgramsRuntime") {
  void* fixture = dlopen(LIBC_ONLY_FIXTURE_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(fixture != nullptr);
  auto run = reinterpret_cast<const char* (*)(const char*)>(dlsym(fixture, "libc_only_fixture_run"));
  REQUIRE(run != nullptr);
  const std::string dir = std::filesystem::temp_directory_path();
  const char* failure = run(dir.c_str());
  CHECK(std::string(failure ? failure : "") == "");
  // This program's own runtime still works beside the fixture's.
  CHECK_THROWS_AS(throw std::logic_error("ours"), std::logic_error);
  dlclose(fixture);
}
