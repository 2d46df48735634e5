# rs-perf-codec: one spill of many partitions, sized vs fixed codec buffers (docs/codec.md).
add_executable(rs-perf-codec ${PROJECT_SOURCE_DIR}/perf/rs-perf-codec.c)
target_link_libraries(rs-perf-codec PRIVATE rshuffle rs_perf)
set_target_properties(rs-perf-codec PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/perf)
