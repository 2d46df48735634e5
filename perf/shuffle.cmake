# Shuffle perf drivers: public headers only (scripts/check-layering).
add_executable(rs-perf-swap ${PROJECT_SOURCE_DIR}/perf/rs-perf-swap.c)
target_link_libraries(rs-perf-swap PRIVATE rshuffle)
set_target_properties(rs-perf-swap PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/perf)
add_executable(rs-shuffle-bench ${PROJECT_SOURCE_DIR}/perf/rs-shuffle-bench.c)
target_link_libraries(rs-shuffle-bench PRIVATE rshuffle)
set_target_properties(rs-shuffle-bench PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/perf)
