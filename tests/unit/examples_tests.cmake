# The example programs' parts that run without a GPU: ring_train's pipeline schedule.
if(TARGET ring_train_schedule)
  hangwatch_unit_test(examples ring_train_schedule)
endif()
