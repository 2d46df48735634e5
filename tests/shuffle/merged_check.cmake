# Merged pushes (docs/shuffle.md, "Merged pushes"): a many-partition shuffle
# through rs-shuffle-bench, every record verified (the EXPECT of the caller),
# must travel in far fewer writes than batches and must not spill (the
# caller sizes the arenas: tests/shuffle/CMakeLists.txt). "Far fewer" is 8
# times: a write still filling is sealed after 2 ms, so a slow run (the
# sanitizer stages, load) seals writes of fewer batches; seen: 2,000
# partitions over TCP 34x plain, 15x under ThreadSanitizer; 20,000 over
# shared memory 220x.
#
#   cmake "-DCMD=..." "-DFIELDS=..." "-DEXPECT=..." [-DSPILL=ON] -P merged_check.cmake
include(${CMAKE_CURRENT_LIST_DIR}/../perf_json_check.cmake)
foreach(key worker_batches worker_merged_writes worker_merged_batches worker_merged_in_place
            map_batches grant_requests merged_writes spilled_bytes)
    string(JSON ${key} GET "${last}" results 0 ${key})
endforeach()
math(EXPR direct "${worker_batches} - ${worker_merged_batches}")
math(EXPR writes "${worker_merged_writes} + ${direct}")
message(STATUS "batches ${worker_batches} (merged ${worker_merged_batches}) in ${writes} writes "
               "(${worker_merged_writes} merged), ${grant_requests} grant requests, "
               "spilled ${spilled_bytes} bytes, ${worker_merged_in_place} kept in place")
if(worker_merged_writes EQUAL 0 OR NOT merged_writes EQUAL worker_merged_writes)
    message(FATAL_ERROR "merged writes: pushers ${merged_writes}, workers ${worker_merged_writes}")
endif()
math(EXPR writes_x8 "${writes} * 8")
math(EXPR requests_x8 "${grant_requests} * 8")
if(writes_x8 GREATER worker_batches OR requests_x8 GREATER map_batches)
    message(FATAL_ERROR "${worker_batches} batches took ${writes} writes and ${grant_requests} "
                        "grant requests: not 8 times fewer")
endif()
# -DSPILL=ON: arenas sized short, so merged extents (shared by many
# partitions) must be spilled and read back; every record is still verified.
if(SPILL)
    if(spilled_bytes EQUAL 0 OR worker_merged_in_place EQUAL 0)
        message(FATAL_ERROR "spilled ${spilled_bytes} bytes, ${worker_merged_in_place} merged "
                            "batches kept where they landed: expected both above 0")
    endif()
    return()
endif()
# With room in the data area every merged write lands there and its frames
# are indexed where they lie: none is copied out of the staging reserve.
if(NOT spilled_bytes EQUAL 0 OR NOT worker_merged_in_place EQUAL worker_merged_batches)
    message(FATAL_ERROR "spilled ${spilled_bytes} bytes, ${worker_merged_in_place} of "
                        "${worker_merged_batches} merged batches kept where they landed: "
                        "the arena was short")
endif()
