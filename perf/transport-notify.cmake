# rs-bench-notify: fence vs flush ordering of the UCX notified put (see
# docs/transport.md), and its smoke test: tiny counts, then the last line must
# be {"results": [...]} with the fields.
add_executable(rs-bench-notify ${CMAKE_CURRENT_LIST_DIR}/rs-bench-notify.c)
target_link_libraries(rs-bench-notify PRIVATE rshuffle rs_perf)
target_compile_definitions(rs-bench-notify PRIVATE _GNU_SOURCE)
set_target_properties(rs-bench-notify PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/perf)
add_test(NAME perf_transport_notify_smoke
         COMMAND ${CMAKE_COMMAND}
                 "-DCMD=$<TARGET_FILE:rs-bench-notify>;--json;--transport;shm;--size;64,4K;--count;200;--repeat;1"
                 -DRESULTS=4 # 2 sizes x (fence, flush)
                 "-DRESULT_FIELDS=test;transport;mode;size;mib_s;us" -DTIMEOUT=120
                 -P ${PROJECT_SOURCE_DIR}/tests/perf_json_check.cmake)
set_tests_properties(perf_transport_notify_smoke PROPERTIES LABELS "perf" TIMEOUT 120)
