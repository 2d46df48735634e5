# Runs perf/compare-mpi with tiny sizes, one pair per case, and checks that
# its last line is the JSON object it promises (shape and plausibility only;
# the comparison itself is for full runs, see docs/shuffle.md). Registered
# only where MPI was found at configure time (perf/mpi.cmake).
set(CMD ${COMPARE} --json --size 4M --procs 2 --split 1+1+1 --bcast 1K:1 --executor 1+1+1:4x2
        --executor-partitions 16 --pairs 1 --build ${BUILD} --mpirun ${MPIRUN})
set(RESULTS 4) # colocated 2, split 1+1+1, bcast 1 KiB to 1 reader, executor 4 tasks x 2
set(RESULT_FIELDS case bytes ratio pairs)
set(TIMEOUT 280)
include(${CMAKE_CURRENT_LIST_DIR}/../perf_json_check.cmake)
foreach(i 0 1 2 3)
    string(JSON case GET "${last}" results ${i} case)
    string(JSON ratio GET "${last}" results ${i} ratio)
    if(case STREQUAL "shuffle" OR case STREQUAL "executor")
        string(JSON ours GET "${last}" results ${i} rshuffle_s)
        string(JSON theirs GET "${last}" results ${i} mpi_s)
        string(JSON layout GET "${last}" results ${i} layout)
        if(NOT layout MATCHES "^(colocated|split)$")
            message(FATAL_ERROR "result ${i}: layout '${layout}': ${last}")
        endif()
    elseif(case STREQUAL "bcast")
        string(JSON ours GET "${last}" results ${i} rshuffle_us)
        string(JSON theirs GET "${last}" results ${i} mpi_us)
    else()
        message(FATAL_ERROR "result ${i}: case '${case}': ${last}")
    endif()
    if(NOT ours GREATER 0 OR NOT theirs GREATER 0 OR NOT ratio GREATER 0)
        message(FATAL_ERROR "result ${i} has implausible values: ${last}")
    endif()
endforeach()
