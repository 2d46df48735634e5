# The MPI yardsticks perf/compare-mpi measures rshuffle against:
# build/perf/mpi-shuffle (MPI_Alltoallv) and build/perf/mpi-bcast (MPI_Bcast).
# Built only where MPI is found (openmpi-bin, libopenmpi-dev: scripts/install-deps);
# nothing else needs MPI. Plain MPI programs: no rshuffle, only perf/records.h.
find_package(MPI COMPONENTS C QUIET)
if(NOT MPI_C_FOUND)
    message(STATUS "MPI not found: perf/compare-mpi's mpi-shuffle and mpi-bcast are not built")
    return()
endif()
foreach(prog mpi-shuffle mpi-bcast)
    add_executable(${prog} ${CMAKE_CURRENT_LIST_DIR}/${prog}.c)
    target_link_libraries(${prog} PRIVATE MPI::MPI_C rs_perf)
    target_include_directories(${prog} PRIVATE ${PROJECT_SOURCE_DIR}/include) # perf_json.h
    set_target_properties(${prog} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/perf)
endforeach()

# compare-mpi's smoke test, only here: it needs MPI (no other test does).
if(MPIEXEC_EXECUTABLE)
    add_test(NAME perf_compare_mpi_smoke
             COMMAND ${CMAKE_COMMAND} -DCOMPARE=${PROJECT_SOURCE_DIR}/perf/compare-mpi
                     -DBUILD=${PROJECT_BINARY_DIR} -DMPIRUN=${MPIEXEC_EXECUTABLE}
                     -P ${PROJECT_SOURCE_DIR}/tests/shuffle/compare_mpi_smoke.cmake)
    set_tests_properties(perf_compare_mpi_smoke PROPERTIES LABELS perf TIMEOUT 300
                         ENVIRONMENT "RSHUFFLE_LOG=error")
    # mpi-shuffle --group: every record found in its own partition's runs,
    # ranks holding equal and unequal shares of the partitions.
    foreach(shape 2:16 2:2000 3:7)
        string(REPLACE ":" ";" np_parts "${shape}")
        list(GET np_parts 0 np)
        list(GET np_parts 1 parts)
        add_test(NAME perf_mpi_shuffle_group_${np}x${parts}
                 COMMAND ${MPIEXEC_EXECUTABLE} --oversubscribe --mca pml ob1 --mca btl self,vader
                         -np ${np} $<TARGET_FILE:mpi-shuffle> --size 8M --round 1M
                         --partitions ${parts} --group)
        set_tests_properties(perf_mpi_shuffle_group_${np}x${parts} PROPERTIES
                             LABELS perf TIMEOUT 120 PASS_REGULAR_EXPRESSION "shuffle verified"
                             ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
    endforeach()
endif()
