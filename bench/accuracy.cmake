# The fault campaign (issue 27): bench/accuracy.py. CI runs one job of every class with a
# fixed seed (re-runnable: the seed is printed) and fails on any wrong verdict (no class is
# tolerated); the published table comes from a run with --runs 20 or more, by hand.
add_test(NAME e2e.accuracy.campaign_logic
         COMMAND ${CMAKE_COMMAND} -E env PYTHONDONTWRITEBYTECODE=1 ${Python3_EXECUTABLE} -m unittest -v test_accuracy_campaign
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}/tests/e2e)
set_tests_properties(e2e.accuracy.campaign_logic PROPERTIES TIMEOUT 30 LABELS e2e)
if(NOT HANGWATCH_REAL_CUDA AND TARGET forensics AND TARGET ring_train AND TARGET trainshim)
  add_test(NAME e2e.accuracy.one_per_class
           COMMAND ${CMAKE_COMMAND} -E env HANGWATCH_SOURCE_DIR=${PROJECT_SOURCE_DIR} PYTHONDONTWRITEBYTECODE=1
                   FORENSICS=$<TARGET_FILE:forensics> RING_TRAIN=$<TARGET_FILE:ring_train>
                   TRAIN_SHIM=$<TARGET_FILE:trainshim>
                   ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/accuracy.py
                   --build ${PROJECT_BINARY_DIR} --runs 1 --seed 27
                   --json ${CMAKE_CURRENT_BINARY_DIR}/accuracy_ci.json
                   --keep-wrong ${CMAKE_CURRENT_BINARY_DIR}/accuracy-wrong
           WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
  set_tests_properties(e2e.accuracy.one_per_class PROPERTIES
    COST 200
    TIMEOUT 900
    RESOURCE_LOCK mpi_job
    LABELS e2e
    SKIP_REGULAR_EXPRESSION "\\.\\.\\. skipped")
endif()
