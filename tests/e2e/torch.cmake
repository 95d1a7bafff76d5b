# Unmodified PyTorch under the real torchrun on simgpu (issue 41): needs the pinned torch
# (scripts/install-deps.sh --torch, HANGWATCH_TORCH_VENV) and the drop-in folder; skipped
# without them unless HANGWATCH_REQUIRE_TORCH is set, as scripts/test.sh sets it.
if(TARGET forensics AND SIMGPU_DROPIN_DIR)
  hangwatch_e2e_test(torch.healthy test_torch.HealthyJob 300)
  hangwatch_e2e_test(torch.dead_link
                     test_torch.HungJob.test_dead_link_inside_ddps_all_reduce_is_named 240)
  hangwatch_e2e_test(torch.dead_link_two_nodes
                     test_torch.HungJob.test_dead_link_between_two_nodes_on_nccls_own_algorithm_is_named 240)
  # A NIC that stops, the collector off: named from NCCL's INFO lines the watchdog has NCCL write.
  hangwatch_e2e_test(torch.dead_nic_without_the_debugger
                     test_torch.HungJob.test_dead_nic_between_two_nodes_is_named_without_the_debugger 240)
  hangwatch_e2e_test(torch.python_stall
                     test_torch.HungJob.test_rank_stuck_in_python_is_named_with_its_python_frames 240)
  hangwatch_e2e_test(torch.gpu_stops test_torch.HungJob.test_gpu_that_stops_is_named 240)
  # PyTorch's own watchdog declares the hang (issue 42): its abort waits for the dumps.
  foreach(case IN ITEMS sigabrt_mode_3_with_hangwatchs_timeout_far_away
                        ncclcommabort_mode_1_with_hangwatchs_timeout_far_away
                        sigabrt_mode_3_with_equal_timeouts
                        ncclcommabort_mode_1_with_equal_timeouts_lands_mid_collection)
    hangwatch_e2e_test(torch.pytorch_timeout.${case} test_torch.PyTorchsOwnTimeout.test_${case} 240)
    list(APPEND pytorch_timeout_tests e2e.torch.pytorch_timeout.${case})
  endforeach()
  # The real torchrun restarting its workers (issue 44): a clean restart with each attempt's
  # own store, and a restarted worker that reads the last attempt's id from the shared one.
  hangwatch_e2e_test(torch.restarts.clean_second_attempt
                     test_torch.RealTorchrunRestarts.test_attempt_0_hangs_and_is_aborted_attempt_1_runs_clean_and_nothing_of_0_is_lost 300)
  hangwatch_e2e_test(torch.restarts.stale_unique_id
                     test_torch.RealTorchrunRestarts.test_a_restarted_worker_that_reads_the_last_attempts_unique_id_is_named 300)
  # Beside PyTorch's Flight Recorder (issue 42): bench/vs_flight_recorder.py at --runs 1 on the
  # classes the cases above do not run.
  # PyTorch's own pipeline schedules (issue 45): a stage stuck in Python after a slower stage.
  hangwatch_e2e_test(torch.pipeline
                     test_torch.TorchPipeline.test_a_stage_stuck_in_python_after_a_slower_stage_is_named_with_both 240)
  # A rank killed alone on its node, one torchrun agent per node (the agent of another node never
  # ends its workers, so they hang as on a cluster), collector off: named from NCCL's RAS.
  hangwatch_e2e_test(torch.pipeline_stage_killed
                     test_torch.TorchPipeline.test_the_last_stage_killed_alone_on_its_node_is_named 240)
  hangwatch_e2e_test(torch.rank_killed_alone
                     test_torch.HungJob.test_a_rank_killed_alone_on_its_node_is_named_from_nccls_ras 240)
  hangwatch_e2e_test(torch.vs_flight_recorder
                     test_vs_flight_recorder.SideBySide.test_hangwatch_is_never_wrong_and_right_wherever_flight_recorder_is 900)
  set_property(TEST e2e.torch.healthy e2e.torch.dead_link e2e.torch.dead_link_two_nodes
               e2e.torch.dead_nic_without_the_debugger e2e.torch.python_stall
               e2e.torch.gpu_stops ${pytorch_timeout_tests} e2e.torch.restarts.clean_second_attempt
               e2e.torch.restarts.stale_unique_id e2e.torch.vs_flight_recorder e2e.torch.pipeline
               e2e.torch.pipeline_stage_killed e2e.torch.rank_killed_alone
               APPEND PROPERTY ENVIRONMENT FORENSICS=$<TARGET_FILE:forensics> SIMGPU_DROPIN_DIR=${SIMGPU_DROPIN_DIR}
               HANGWATCH_TORCH_VENV=${HANGWATCH_TORCH_VENV})
endif()
