# One process driving several devices (issue 15).
hangwatch_e2e_test(device_ring.correct_shapes test_device_ring.CorrectShapes 300)
hangwatch_e2e_test(device_ring.dead_link test_device_ring.DeadLink 120)
hangwatch_e2e_test(device_ring.before_rank_known test_device_ring.BeforeItsRankIsKnown 120)
hangwatch_e2e_test(device_ring.processes_of_several_devices test_device_ring.SeveralProcessesOfSeveralDevices 240)
set_property(TEST e2e.device_ring.correct_shapes e2e.device_ring.dead_link e2e.device_ring.before_rank_known
             e2e.device_ring.processes_of_several_devices APPEND PROPERTY ENVIRONMENT
             DEVICE_RING=$<TARGET_FILE:device_ring>)
if(TARGET forensics)
  set_property(TEST e2e.device_ring.dead_link e2e.device_ring.processes_of_several_devices APPEND PROPERTY ENVIRONMENT
               FORENSICS=$<TARGET_FILE:forensics>)
endif()
