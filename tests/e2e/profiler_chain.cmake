# The job's own NCCL profiler plugin behind the watchdog's (issues 16 and 29): what it sees
# alone and under the watchdog must be identical, whichever way NCCL finds it.
if(TARGET forensics AND TARGET census_profiler)
  set(chain_cases
    v5=JobProfilerUnderTheWatchdog.test_proxy_ops_only_v5_named_by_path
    v4=JobProfilerUnderTheWatchdog.test_v4_plugin_named_by_nccls_bare_name_rule
    masks_per_communicator=JobProfilerUnderTheWatchdog.test_masks_per_communicator
    home_nccl_conf=JobProfilerUnderTheWatchdog.test_plugin_named_in_the_home_nccl_conf
    default_name=JobProfilerUnderTheWatchdog.test_nccls_default_library_name
    net_plugin_library=JobProfilerUnderTheWatchdog.test_the_net_plugins_library_when_no_profiler_library_opens
    conf_file=JobProfilerFromTheConfFile
    stall_60s=HeldBackReceiveStall)
  foreach(entry ${chain_cases})
    string(REPLACE "=" ";" parts ${entry})
    list(GET parts 0 name)
    list(GET parts 1 test)
    hangwatch_e2e_test(profiler_chain.${name} test_profiler_chain.${test} 180)
    set_property(TEST e2e.profiler_chain.${name} APPEND PROPERTY ENVIRONMENT
                 FORENSICS=$<TARGET_FILE:forensics> CENSUS_PROFILER=$<TARGET_FILE:census_profiler>)
  endforeach()
  add_dependencies(census_profiler census_profiler_v4 census_net_plugin)
endif()
if(TEST e2e.profiler_chain.conf_file)
  set_property(TEST e2e.profiler_chain.conf_file PROPERTY RUN_SERIAL TRUE)  # its slow link is timed
endif()
