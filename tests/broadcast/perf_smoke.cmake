# Runs rs-bcast-bench with tiny sizes and checks that its last line is the
# JSON object it promises (shape and plausibility only; the bars are for full
# runs, see docs/broadcast.md).
set(CMD ${DRIVER} --json --sizes 1K,2K,200K --readers 1,2 --iters 2 --block-size 64K)
set(RESULTS 12) # 3 sizes x 2 reader counts x 2 modes
set(RESULT_FIELDS bytes readers mode median_us round_trips reads source_reads)
set(TIMEOUT 100)
include(${CMAKE_CURRENT_LIST_DIR}/../perf_json_check.cmake)
math(EXPR last_i "${n} - 1")
foreach(i RANGE ${last_i})
    string(JSON mode GET "${last}" results ${i} mode)
    string(JSON bytes GET "${last}" results ${i} bytes)
    string(JSON rt GET "${last}" results ${i} round_trips)
    string(JSON reads GET "${last}" results ${i} reads)
    string(JSON us GET "${last}" results ${i} median_us)
    if(NOT mode MATCHES "^(torrent|source)$" OR us LESS_EQUAL 0 OR
       (bytes GREATER 1024 AND NOT rt GREATER 0))
        message(FATAL_ERROR "result ${i} has implausible values: ${last}")
    endif()
    # An embedded object (1 KiB, in its descriptor) costs nothing; an inline one (2 KiB) one
    # round trip; neither reads.
    if(bytes EQUAL 1024 AND (NOT rt EQUAL 0 OR NOT reads EQUAL 0))
        message(FATAL_ERROR "result ${i}: an embedded object took ${rt} round trips, ${reads} reads")
    endif()
    if(bytes EQUAL 2048 AND (NOT rt EQUAL 1 OR NOT reads EQUAL 0))
        message(FATAL_ERROR "result ${i}: an inline object took ${rt} round trips, ${reads} reads")
    endif()
endforeach()
