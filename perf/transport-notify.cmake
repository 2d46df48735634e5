# rs-bench-notify: fence vs flush ordering of the UCX notified put (see
# docs/transport.md), and its smoke test. Run as a script
# (cmake -DDRIVER=<path> -P transport-notify.cmake) it is the smoke check:
# tiny counts, then the last line must be {"results": [...]} with the fields.
if(CMAKE_SCRIPT_MODE_FILE)
    execute_process(
        COMMAND ${DRIVER} --json --transport shm --size 64,4K --count 200 --repeat 1
        OUTPUT_VARIABLE out RESULT_VARIABLE rc TIMEOUT 120)
    if(NOT rc EQUAL 0)
        message(FATAL_ERROR "rs-bench-notify failed (${rc}):\n${out}")
    endif()
    string(STRIP "${out}" out)
    string(REGEX REPLACE "^.*\n" "" last "${out}")
    string(JSON n ERROR_VARIABLE err LENGTH "${last}" results)
    if(err OR NOT n EQUAL 4) # 2 sizes x (fence, flush)
        message(FATAL_ERROR "last line is not {\"results\": [4 entries]}: ${err}\n${last}")
    endif()
    math(EXPR end "${n} - 1")
    foreach(i RANGE ${end})
        foreach(field test transport mode size mbps usec)
            string(JSON v ERROR_VARIABLE err GET "${last}" results ${i} ${field})
            if(err OR "${v}" STREQUAL "")
                message(FATAL_ERROR "result ${i} has no ${field}: ${last}")
            endif()
        endforeach()
    endforeach()
    return()
endif()

add_executable(rs-bench-notify ${CMAKE_CURRENT_LIST_DIR}/rs-bench-notify.c)
target_link_libraries(rs-bench-notify PRIVATE rshuffle)
target_compile_definitions(rs-bench-notify PRIVATE _GNU_SOURCE)
set_target_properties(rs-bench-notify PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/perf)
add_test(NAME perf_transport_notify_smoke
         COMMAND ${CMAKE_COMMAND} -DDRIVER=$<TARGET_FILE:rs-bench-notify>
                 -P ${CMAKE_CURRENT_LIST_FILE})
set_tests_properties(perf_transport_notify_smoke PROPERTIES LABELS "perf" TIMEOUT 120)
