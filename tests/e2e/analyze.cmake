# forensics analyze / timeline on real ring_train jobs (issue #6).
if(TARGET forensics)
  hangwatch_e2e_test(analyze.healthy test_analyze.HealthyRuns 240)
  hangwatch_e2e_test(analyze.slow_gpu test_analyze.SlowGpu 90)
  hangwatch_e2e_test(analyze.slow_link test_analyze.SlowLink 120)
  hangwatch_e2e_test(analyze.loaded_machine test_analyze.LoadedMachine 900)
  hangwatch_e2e_test(analyze.issue_stalls test_analyze.IssueStalls 150)
  hangwatch_e2e_test(analyze.host_stalls test_analyze.HostStalls 150)
  hangwatch_e2e_test(analyze.timeline test_analyze.Timeline 90)
  hangwatch_e2e_test(analyze.bad_input test_analyze.BadInput 90)
  set_property(TEST e2e.analyze.healthy e2e.analyze.slow_gpu e2e.analyze.slow_link e2e.analyze.loaded_machine
               e2e.analyze.issue_stalls e2e.analyze.host_stalls e2e.analyze.timeline e2e.analyze.bad_input
               APPEND PROPERTY ENVIRONMENT FORENSICS=$<TARGET_FILE:forensics>)
  # They measure simgpu timings: a unit test on the other core (ctest -j) skews a
  # healthy run against its baseline.
  set_property(TEST e2e.analyze.healthy e2e.analyze.slow_gpu e2e.analyze.slow_link e2e.analyze.loaded_machine
               e2e.analyze.issue_stalls e2e.analyze.host_stalls PROPERTY RUN_SERIAL TRUE)
endif()
