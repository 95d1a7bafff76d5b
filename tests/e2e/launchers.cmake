# Abort mode under launchers that kill the job when one rank exits (issue #18): mpirun, and
# the torchrun- and srun-like launchers in launchers/. The binary comes in through FORENSICS.
if(TARGET forensics)
  hangwatch_e2e_test(launchers.mpirun_kill_on_exit
                     test_launchers.MpirunKillOnExit.test_mpirun_kills_the_job_only_after_every_rank_is_done 300)
  hangwatch_e2e_test(launchers.torchrun_dead_rank
                     test_launchers.TorchrunLikeLauncher.test_dead_rank_on_six_ranks_under_a_torchrun_like_launcher 300)
  hangwatch_e2e_test(launchers.torchrun_sigterm_while_dumping
                     test_launchers.TorchrunLikeLauncher.test_sigterm_from_the_launcher_while_dumping_loses_nothing 300)
  hangwatch_e2e_test(launchers.srun_host_loop
                     test_launchers.SrunLikeLauncher.test_rank_stuck_in_host_code_under_an_srun_like_launcher 300)
  # Restarted jobs (issue #31): a launch never triggered by an earlier one, each with its own verdict.
  hangwatch_e2e_test(restarts.healthy_after_hang_mpirun
                     test_restarts.HealthyJobAfterAHungOne.test_same_folder_under_mpirun 240)
  hangwatch_e2e_test(restarts.healthy_after_hang_same_key
                     test_restarts.HealthyJobAfterAHungOne.test_same_folder_and_the_same_launch_key_under_a_torchrun_like_launcher 240)
  hangwatch_e2e_test(restarts.healthy_after_hang_folder_deleted
                     test_restarts.HealthyJobAfterAHungOne.test_folder_deleted_between_the_two 240)
  hangwatch_e2e_test(restarts.healthy_after_hang_killed_mid_dump
                     test_restarts.HealthyJobAfterAHungOne.test_first_job_killed_mid_dump 240)
  hangwatch_e2e_test(restarts.two_attempts_mpirun
                     test_restarts.TwoAttemptsOfOneJob.test_under_mpirun_each_attempt_gets_its_own_verdict 300)
  hangwatch_e2e_test(restarts.two_attempts_torchrun
                     test_restarts.TwoAttemptsOfOneJob.test_a_torchrun_like_launcher_restarting_the_job_itself 300)
  hangwatch_e2e_test(restarts.three_attempts test_restarts.ThreeAttemptsOfTheSameWorldSize 400)
  set_property(TEST e2e.launchers.mpirun_kill_on_exit e2e.launchers.torchrun_dead_rank
               e2e.launchers.torchrun_sigterm_while_dumping e2e.launchers.srun_host_loop
               e2e.restarts.healthy_after_hang_mpirun e2e.restarts.healthy_after_hang_same_key
               e2e.restarts.healthy_after_hang_folder_deleted e2e.restarts.healthy_after_hang_killed_mid_dump
               e2e.restarts.two_attempts_mpirun e2e.restarts.two_attempts_torchrun e2e.restarts.three_attempts
               APPEND PROPERTY ENVIRONMENT FORENSICS=$<TARGET_FILE:forensics>)
endif()
