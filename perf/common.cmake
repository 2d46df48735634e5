# What every perf driver shares: perf_json.h's commit (baked in at configure
# time, "unknown" outside git; a new commit reconfigures, as the build depends
# on git's HEAD and branch files) through rs_perf, and the launcher of
# perf/launch.h through rs_perf_launch: MPI collectives where CMake finds MPI
# (perf/launch_mpi.c), else one that says --launcher mpi needs MPI.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
                OUTPUT_VARIABLE rs_perf_commit OUTPUT_STRIP_TRAILING_WHITESPACE
                ERROR_QUIET RESULT_VARIABLE rs_perf_git_rc)
if(NOT rs_perf_git_rc EQUAL 0 OR rs_perf_commit STREQUAL "")
    set(rs_perf_commit unknown)
else()
    execute_process(COMMAND git symbolic-ref -q HEAD WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
                    OUTPUT_VARIABLE rs_perf_ref OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    foreach(ref HEAD ${rs_perf_ref})
        execute_process(COMMAND git rev-parse --git-path ${ref}
                        WORKING_DIRECTORY ${PROJECT_SOURCE_DIR} OUTPUT_VARIABLE file
                        OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
        get_filename_component(file "${file}" ABSOLUTE BASE_DIR ${PROJECT_SOURCE_DIR})
        if(EXISTS "${file}")
            set_property(DIRECTORY ${PROJECT_SOURCE_DIR} APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
                         "${file}")
        endif()
    endforeach()
endif()
add_library(rs_perf INTERFACE)
target_compile_definitions(rs_perf INTERFACE PERF_COMMIT="${rs_perf_commit}")

find_package(MPI COMPONENTS C QUIET)
if(MPI_C_FOUND)
    add_library(rs_perf_launch STATIC ${CMAKE_CURRENT_LIST_DIR}/launch_mpi.c)
    target_link_libraries(rs_perf_launch PUBLIC MPI::MPI_C)
    message(STATUS "MPI found: rs-shuffle-bench and rs-bcast-bench take --launcher mpi")
else()
    add_library(rs_perf_launch STATIC ${CMAKE_CURRENT_LIST_DIR}/launch_none.c)
    message(STATUS "MPI not found: rs-shuffle-bench and rs-bcast-bench without --launcher mpi")
endif()
target_link_libraries(rs_perf_launch PUBLIC rs_perf)

# The MPI launcher's smoke tests (only where MPI and mpiexec were found): 4
# ranks on this host, each a worker, mapper and reducer, every record
# verified; a broadcast from rank 0 to 3 reader ranks. The environment lets
# Open MPI run as root and more ranks than cores (MPICH ignores it).
if(MPI_C_FOUND AND MPIEXEC_EXECUTABLE)
    set(rs_mpi_env "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
                   "OMPI_MCA_rmaps_base_oversubscribe=1;RSHUFFLE_LOG=error")
    set(rs_mpirun ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 4 ${MPIEXEC_PREFLAGS})
    add_test(NAME perf_shuffle_mpi_smoke
             COMMAND ${CMAKE_COMMAND}
                     "-DCMD=${rs_mpirun};$<TARGET_FILE:rs-shuffle-bench>;--launcher;mpi;--json;--size;8M;--partitions;13"
                     "-DFIELDS=results.0.total_s;results.0.gbit_s;meta.launcher"
                     "-DEXPECT=results.0.ok=ON;results.0.lost=0;results.0.duplicates=0;results.0.bad=0;results.0.launcher=mpi;results.0.procs=4;meta.ranks=4"
                     -DRESULTS=1 -DTIMEOUT=170 -P ${PROJECT_SOURCE_DIR}/tests/perf_json_check.cmake)
    add_test(NAME perf_bcast_mpi_smoke
             COMMAND ${CMAKE_COMMAND}
                     "-DCMD=${rs_mpirun};$<TARGET_FILE:rs-bcast-bench>;--launcher;mpi;--json;--sizes;1K,300K;--iters;2;--block-size;64K"
                     -DRESULTS=4 "-DRESULT_FIELDS=bytes;readers;mode;median_us;get_us;round_trips"
                     "-DEXPECT=results.0.readers=3;results.3.readers=3;meta.launcher=mpi"
                     -DTIMEOUT=110 -P ${PROJECT_SOURCE_DIR}/tests/perf_json_check.cmake)
    set_tests_properties(perf_shuffle_mpi_smoke PROPERTIES LABELS "perf;mpi" TIMEOUT 180
                         ENVIRONMENT "${rs_mpi_env}")
    set_tests_properties(perf_bcast_mpi_smoke PROPERTIES LABELS "perf;mpi" TIMEOUT 120
                         ENVIRONMENT "${rs_mpi_env}")
endif()
