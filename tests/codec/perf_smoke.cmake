# Runs rs-perf-codec with tiny sizes and checks that its last line is the JSON
# object it promises (shape and plausibility only; the bars are for full runs).
set(CMD ${DRIVER} --json --partitions 16 --rounds 1 --sizes 22,2200)
set(RESULTS 4) # 2 codecs x 2 sizes
set(RESULT_FIELDS codec bytes_per_partition fixed_ns sized_ns fixed_alloc_bytes sized_alloc_bytes)
include(${CMAKE_CURRENT_LIST_DIR}/../perf_json_check.cmake)
math(EXPR last_i "${n} - 1")
foreach(i RANGE ${last_i})
    string(JSON codec GET "${last}" results ${i} codec)
    string(JSON sized GET "${last}" results ${i} sized_alloc_bytes)
    string(JSON fixed GET "${last}" results ${i} fixed_alloc_bytes)
    string(JSON ns GET "${last}" results ${i} sized_ns)
    if(NOT codec MATCHES "^(snappy|lz4)$" OR NOT sized GREATER 0 OR NOT fixed GREATER sized
       OR NOT ns GREATER 0)
        message(FATAL_ERROR "result ${i} has implausible values: ${last}")
    endif()
endforeach()
