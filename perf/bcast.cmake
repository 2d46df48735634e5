# rs-bcast-bench: the torrent broadcast study (docs/broadcast.md).
add_executable(rs-bcast-bench ${PROJECT_SOURCE_DIR}/perf/rs-bcast-bench.c)
target_link_libraries(rs-bcast-bench PRIVATE rshuffle rs_perf_launch)
set_target_properties(rs-bcast-bench PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/perf)
