# rs-sort: the distributed sort driver (public headers only, as every perf driver).
add_executable(rs-sort ${PROJECT_SOURCE_DIR}/perf/rs-sort.c)
target_link_libraries(rs-sort PRIVATE rshuffle rs_perf_launch m)
set_target_properties(rs-sort PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/perf)

# Its MPI yardstick (perf/compare-mpi --cases sort): a plain MPI program, no
# rshuffle, only perf/sort_records.h; built only where MPI is found.
find_package(MPI COMPONENTS C QUIET)
if(MPI_C_FOUND)
    add_executable(mpi-sort ${CMAKE_CURRENT_LIST_DIR}/mpi-sort.c)
    target_link_libraries(mpi-sort PRIVATE MPI::MPI_C rs_perf m)
    target_include_directories(mpi-sort PRIVATE ${PROJECT_SOURCE_DIR}/include) # perf_json.h
    set_target_properties(mpi-sort PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/perf)
endif()
# The MPI launcher's sort smoke test: 3 ranks, each a worker, map and reduce tasks.
if(MPI_C_FOUND AND MPIEXEC_EXECUTABLE)
    add_test(NAME perf_sort_mpi_smoke
             COMMAND ${CMAKE_COMMAND}
                     "-DCMD=${MPIEXEC_EXECUTABLE};${MPIEXEC_NUMPROC_FLAG};3;${MPIEXEC_PREFLAGS};$<TARGET_FILE:rs-sort>;--launcher;mpi;--json;--size;8M;--threads;2"
                     "-DFIELDS=results.0.total_s;results.0.sort_s"
                     "-DEXPECT=results.0.ok=ON;results.0.procs=3;results.0.launcher=mpi;meta.ranks=3"
                     -DTIMEOUT=110 -P ${PROJECT_SOURCE_DIR}/tests/perf_json_check.cmake)
    add_test(NAME perf_mpi_sort_smoke
             COMMAND ${CMAKE_COMMAND}
                     "-DCMD=${MPIEXEC_EXECUTABLE};${MPIEXEC_NUMPROC_FLAG};3;${MPIEXEC_PREFLAGS};$<TARGET_FILE:mpi-sort>;--json;--size;8M;--round;1M;--skew;zipf:1.2"
                     "-DFIELDS=results.0.total_s;results.0.largest_over_mean"
                     "-DEXPECT=results.0.ok=ON;results.0.ranks=3"
                     -DTIMEOUT=110 -P ${PROJECT_SOURCE_DIR}/tests/perf_json_check.cmake)
    set_tests_properties(perf_sort_mpi_smoke perf_mpi_sort_smoke PROPERTIES LABELS "perf;mpi"
                         TIMEOUT 120 ENVIRONMENT
                         "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1;RSHUFFLE_LOG=error")
endif()

# rs-sort-check is a script: its --version is written in it, and must be ours.
file(STRINGS ${PROJECT_SOURCE_DIR}/perf/rs-sort-check rs_sort_check_version REGEX "^VERSION = ")
if(NOT rs_sort_check_version MATCHES "\"${PROJECT_VERSION}\"")
    message(FATAL_ERROR "perf/rs-sort-check says ${rs_sort_check_version}, the project is ${PROJECT_VERSION}")
endif()
