// Finding the definition a caller would have reached when it lives in a library that
// was opened RTLD_LOCAL (invisible to dlsym(RTLD_NEXT)), or loaded only after the first call.
#include <catch2/catch.hpp>
#include <dlfcn.h>

#include "hangwatch/watchdog/next_symbol.h"
#include "hangwatch/watchdog/symbol_lookup.h"

using namespace hangwatch::watchdog;

#ifndef LOCAL_DEFINITION_LIBRARY
#error "LOCAL_DEFINITION_LIBRARY must name the fixture library"
#endif

TEST_CASE("ADefinitionInALibraryOpenedLocallyIsFoundOnceItIsLoaded") {
  NextSymbol<int (*)()> answer{"hangwatch_fixture_answer"};
  CHECK(answer.get() == nullptr);  // not loaded yet: a miss...
  const unsigned long long before = loadedObjectGeneration();
  void* lib = dlopen(LOCAL_DEFINITION_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  REQUIRE(lib != nullptr);
  CHECK(loadedObjectGeneration() > before);
  CHECK(dlsym(RTLD_NEXT, "hangwatch_fixture_answer") == nullptr);  // what used to be all there was
  auto fn = answer.get();  // ...that was not cached
  REQUIRE(fn != nullptr);
  CHECK(fn() == 42);
  CHECK(reinterpret_cast<void*>(fn) == dlsym(lib, "hangwatch_fixture_answer"));
  CHECK(answer.get() == fn);
}

TEST_CASE("ASymbolNoLoadedObjectDefinesIsNull") {
  NextSymbol<void (*)()> missing{"hangwatch_no_such_symbol_anywhere"};
  CHECK(missing.get() == nullptr);
  CHECK(missing.get() == nullptr);
  CHECK(findNextDefinition("hangwatch_no_such_symbol_anywhere") == nullptr);
  CHECK(dlerror() == nullptr);  // nothing of ours left for the program's next dlerror()
}

TEST_CASE("TheGlobalScopeStillComesFirst") {
  // libc is in the global scope: RTLD_NEXT finds it, as before.
  CHECK(findNextDefinition("malloc") == dlsym(RTLD_NEXT, "malloc"));
}
