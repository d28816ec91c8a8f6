normlab_module(normlab_run
  SOURCES run/run_command.cpp run/run_plan.cpp run/points.cpp run/safety.cpp run/merge.cpp run/shapes_command.cpp run/templates.cpp run/bench.cpp run/bench_stack.cpp run/process_memory.cpp run/listing.cpp run/report_command.cpp
  DEPS normlab_config normlab_analysis normlab_data normlab_report OpenMP::OpenMP_CXX)
