# The early warning (issue #26): a stall named within seconds from snapshots alone, no false
# warnings on slow, paused, graph-replaying, non-blocking or idle jobs, and a warning that resumed.
if(TARGET forensics)
  hangwatch_e2e_test(early_warning.dead_inter_node_link
                     test_early_warning.DeadInterNodeLink 360)
  hangwatch_e2e_test(early_warning.no_false_warnings test_early_warning.NoFalseWarnings 600)
  hangwatch_e2e_test(early_warning.host_stall_resumes test_early_warning.HostStallThatResumes 180)
  set_property(TEST e2e.early_warning.dead_inter_node_link e2e.early_warning.no_false_warnings
               e2e.early_warning.host_stall_resumes APPEND PROPERTY ENVIRONMENT FORENSICS=$<TARGET_FILE:forensics>)
endif()
