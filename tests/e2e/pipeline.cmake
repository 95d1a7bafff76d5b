# Pipeline jobs (issue 45): ring_train --pp as a TP x PP x DP job on the 1F1B schedule, and its
# hangs judged from the report, its slowdowns from analyze's critical path
# (tests/e2e/test_pipeline.py). About 55 s together.
hangwatch_e2e_test(pipeline.healthy
                   test_pipeline.HealthyPipelines.test_3d_and_4_stage_jobs_run_to_the_end_checked_and_quiet_under_the_watchdog 120)
foreach(case
    a_stage_rank_stuck_in_host_code_is_named_with_its_stage
    a_stage_that_ran_one_micro_batch_fewer_is_named_with_what_each_side_issued
    a_dead_link_in_one_stages_data_parallel_all_reduce_is_that_link
    a_dead_link_between_stages_inside_a_node_is_the_one_suspect
    a_dead_link_between_stages_on_two_nodes_is_named_from_nccls_profiler)
  hangwatch_e2e_test(pipeline.${case} test_pipeline.PipelineHangs.test_${case} 240)
endforeach()
hangwatch_e2e_test(pipeline.slowdowns
                   test_pipeline.PipelineSlowdowns.test_a_slower_stage_is_the_cause_and_the_same_work_in_the_bubble_is_absorbed 180)
hangwatch_e2e_test(pipeline.hang_after_slowdown test_pipeline.PipelineSlowdowns.test_a_hang_that_follows_a_slowdown_says_so 180)
