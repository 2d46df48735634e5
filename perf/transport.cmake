# The transport perf driver, build/perf/rs-perf-transport, and its smoke test.
#
# This file has two lives: included by the top-level CMakeLists.txt it builds
# the driver; run as `cmake -DDRIVER=<path> -P transport.cmake` it is the smoke
# check: tiny iteration counts, then the last output line must be a JSON object
# {"results": [...]} (tests/perf_json_check.cmake) whose entries carry test,
# transport, size and a positive mib_s or us.
if(CMAKE_SCRIPT_MODE_FILE)
    set(CMD ${DRIVER} --json --transport shm --size 64,4K --iters 20 --warmup 2)
    set(RESULTS 8) # 2 sizes x (put, get, notify, msg)
    set(RESULT_FIELDS test transport size)
    set(TIMEOUT 120)
    include(${CMAKE_CURRENT_LIST_DIR}/../tests/perf_json_check.cmake)
    math(EXPR end "${n} - 1")
    foreach(i RANGE ${end})
        string(JSON mbps ERROR_VARIABLE err_mbps GET "${last}" results ${i} mib_s)
        string(JSON usec ERROR_VARIABLE err_usec GET "${last}" results ${i} us)
        if(err_mbps AND err_usec)
            message(FATAL_ERROR "result ${i} has neither mib_s nor us: ${last}")
        endif()
        if(NOT err_mbps AND NOT mbps GREATER 0)
            message(FATAL_ERROR "result ${i}: mib_s ${mbps} is not positive")
        endif()
        if(NOT err_usec AND NOT usec GREATER 0)
            message(FATAL_ERROR "result ${i}: us ${usec} is not positive")
        endif()
    endforeach()
    return()
endif()

add_executable(rs-perf-transport ${CMAKE_CURRENT_LIST_DIR}/rs-perf-transport.c)
target_link_libraries(rs-perf-transport PRIVATE rshuffle rs_perf)
target_compile_definitions(rs-perf-transport PRIVATE _GNU_SOURCE)
set_target_properties(rs-perf-transport PROPERTIES RUNTIME_OUTPUT_DIRECTORY
                      ${PROJECT_BINARY_DIR}/perf)
add_test(NAME perf_transport_smoke
         COMMAND ${CMAKE_COMMAND} -DDRIVER=$<TARGET_FILE:rs-perf-transport>
                 -P ${CMAKE_CURRENT_LIST_FILE})
set_tests_properties(perf_transport_smoke PROPERTIES LABELS "perf" TIMEOUT 180)

# First-touch and pinning costs of this machine (perf/compare-mpi prints them
# beside its ratios). Standalone: no rshuffle, only perf_json.h.
add_executable(rs-perf-touch ${PROJECT_SOURCE_DIR}/perf/rs-perf-touch.c)
target_link_libraries(rs-perf-touch PRIVATE rs_perf)
target_include_directories(rs-perf-touch PRIVATE ${PROJECT_SOURCE_DIR}/include)
target_compile_definitions(rs-perf-touch PRIVATE _GNU_SOURCE)
set_target_properties(rs-perf-touch PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/perf)

# An idle context's progress round with connections to peers of this host (their own workers).
add_executable(rs-perf-idle ${PROJECT_SOURCE_DIR}/perf/rs-perf-idle.c)
target_link_libraries(rs-perf-idle PRIVATE rshuffle rs_perf)
target_compile_definitions(rs-perf-idle PRIVATE _GNU_SOURCE)
set_target_properties(rs-perf-idle PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/perf)
