# rs-sort: the distributed sort driver (public headers only, as every perf driver).
add_executable(rs-sort ${PROJECT_SOURCE_DIR}/perf/rs-sort.c)
target_link_libraries(rs-sort PRIVATE rshuffle rs_perf_launch m)
set_target_properties(rs-sort PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/perf)
install(TARGETS rs-sort RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
