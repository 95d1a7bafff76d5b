# Look-ups on the shared dump folder per node, at start and in the steady state (issue #44
# item 4), counted by strace: tests/e2e/test_lookups.py.
hangwatch_e2e_test(storage.lookups_per_node test_lookups.LookupsPerNode 120)

# A dump folder on storage that stalls, fills up, turns read-only or errors (issue #44):
# tests/programs/faultyfs.c is a FUSE file system (libfuse3, installed by
# scripts/install-deps.sh --tests) whose changes a control file holds, slows or fails; tmpfs
# and read-only bind mounts are made in the test's own mount namespace.
find_package(PkgConfig)
if(PkgConfig_FOUND)
  pkg_check_modules(FUSE3 IMPORTED_TARGET fuse3)
endif()
if(NOT FUSE3_FOUND)
  message(WARNING "libfuse3 not found (scripts/install-deps.sh --tests installs it): the failing-storage tests are left out")
  return()
endif()
add_executable(faultyfs ${PROJECT_SOURCE_DIR}/tests/programs/faultyfs.c)
target_link_libraries(faultyfs PRIVATE PkgConfig::FUSE3)
if(TARGET forensics)
  set(storage_cases
    stalled_forever test_storage.StalledForever 150
    read_only_at_start test_storage.ReadOnlyAtStart 90
    full_mid_dump test_storage.FullMidDump 90
    removed_before_the_hang test_storage.RemovedBeforeTheHang 90
    slow_writes test_storage.SlowWrites 300)
  while(storage_cases)
    list(POP_FRONT storage_cases name id timeout)
    hangwatch_e2e_test(storage.${name} ${id} ${timeout})
    set_property(TEST e2e.storage.${name} APPEND PROPERTY ENVIRONMENT
                 FORENSICS=$<TARGET_FILE:forensics> FAULTYFS=$<TARGET_FILE:faultyfs>)
  endwhile()
endif()
