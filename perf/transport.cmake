# The transport perf driver, build/perf/rs-perf-transport, and its smoke test.
#
# This file has two lives: included by the top-level CMakeLists.txt it builds
# the driver; run as `cmake -DDRIVER=<path> -P transport.cmake` it is the smoke
# check: tiny iteration counts, then the last output line must be a JSON object
# {"results": [...]} whose entries carry test, transport, size and mbps or usec.
if(CMAKE_SCRIPT_MODE_FILE)
    execute_process(
        COMMAND ${DRIVER} --json --transport shm --size 64,4K --iters 20 --warmup 2
        OUTPUT_VARIABLE out RESULT_VARIABLE rc TIMEOUT 120)
    if(NOT rc EQUAL 0)
        message(FATAL_ERROR "rs-perf-transport failed (${rc}):\n${out}")
    endif()
    string(STRIP "${out}" out)
    string(REGEX REPLACE "^.*\n" "" last "${out}")
    string(JSON n ERROR_VARIABLE err LENGTH "${last}" results)
    if(err OR n EQUAL 0)
        message(FATAL_ERROR "last line is not {\"results\": [...]}: ${err}\n${last}")
    endif()
    # 2 sizes x (put, get, notify, msg)
    if(NOT n EQUAL 8)
        message(FATAL_ERROR "expected 8 results, got ${n}: ${last}")
    endif()
    math(EXPR end "${n} - 1")
    foreach(i RANGE ${end})
        foreach(field test transport size)
            string(JSON v ERROR_VARIABLE err GET "${last}" results ${i} ${field})
            if(err OR "${v}" STREQUAL "")
                message(FATAL_ERROR "result ${i} has no ${field}: ${last}")
            endif()
        endforeach()
        string(JSON mbps ERROR_VARIABLE err_mbps GET "${last}" results ${i} mbps)
        string(JSON usec ERROR_VARIABLE err_usec GET "${last}" results ${i} usec)
        if(err_mbps AND err_usec)
            message(FATAL_ERROR "result ${i} has neither mbps nor usec: ${last}")
        endif()
        if(NOT err_mbps AND NOT mbps GREATER 0)
            message(FATAL_ERROR "result ${i}: mbps ${mbps} is not positive")
        endif()
        if(NOT err_usec AND NOT usec GREATER 0)
            message(FATAL_ERROR "result ${i}: usec ${usec} is not positive")
        endif()
    endforeach()
    message(STATUS "rs-perf-transport smoke: ${n} results")
    return()
endif()

add_executable(rs-perf-transport ${CMAKE_CURRENT_LIST_DIR}/rs-perf-transport.c)
target_link_libraries(rs-perf-transport PRIVATE rshuffle)
target_compile_definitions(rs-perf-transport PRIVATE _GNU_SOURCE)
set_target_properties(rs-perf-transport PROPERTIES RUNTIME_OUTPUT_DIRECTORY
                      ${PROJECT_BINARY_DIR}/perf)
add_test(NAME perf_transport_smoke
         COMMAND ${CMAKE_COMMAND} -DDRIVER=$<TARGET_FILE:rs-perf-transport>
                 -P ${CMAKE_CURRENT_LIST_FILE})
set_tests_properties(perf_transport_smoke PROPERTIES LABELS "perf" TIMEOUT 180)
