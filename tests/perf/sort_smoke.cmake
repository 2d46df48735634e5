# rs-sort's smoke check: perf_json_check.cmake's (the run exits 0, its last
# line is the schema, FIELDS present, EXPECT exact), then plausibility:
#   -DMAX_SKEW=x      results.0.largest_over_mean must be <= x
#   -DMIN_SPILLED=n   results.0.spilled_bytes must be >= n
#   -DCHECK_DIR=dir   -DCHECKER=perf/rs-sort-check -DPYTHON=python3: the output
#                     directory must pass the independent checker with the
#                     run's record count, and a copy with two records swapped
#                     must fail it (the checker is not a yes-sayer)
if(DEFINED CHECK_DIR)
    file(REMOVE_RECURSE "${CHECK_DIR}")
endif()
include(${CMAKE_CURRENT_LIST_DIR}/../perf_json_check.cmake)

if(DEFINED MAX_SKEW)
    string(JSON skew GET "${last}" results 0 largest_over_mean)
    if(skew GREATER MAX_SKEW)
        message(FATAL_ERROR "largest partition ${skew}x the mean, more than ${MAX_SKEW}: ${last}")
    endif()
endif()
if(DEFINED MIN_SPILLED)
    string(JSON spilled GET "${last}" results 0 spilled_bytes)
    if(spilled LESS MIN_SPILLED)
        message(FATAL_ERROR "spilled ${spilled} bytes, expected at least ${MIN_SPILLED}: ${last}")
    endif()
endif()
if(DEFINED CHECK_DIR)
    string(JSON records GET "${last}" results 0 records)
    execute_process(COMMAND ${PYTHON} ${CHECKER} ${CHECK_DIR} --records ${records} --json
                    OUTPUT_VARIABLE out RESULT_VARIABLE rc TIMEOUT 120)
    if(NOT rc EQUAL 0)
        message(FATAL_ERROR "rs-sort-check rejected the output (${rc}): ${out}")
    endif()
    # Two records of the first non-empty part swapped: sorted no more.
    set(bad "${CHECK_DIR}-swapped")
    file(REMOVE_RECURSE "${bad}")
    file(COPY "${CHECK_DIR}/" DESTINATION "${bad}")
    execute_process(COMMAND ${PYTHON} -c [=[
import os, sys
d = sys.argv[1]
for n in sorted(os.listdir(d)):
    p = os.path.join(d, n)
    with open(p, "r+b") as f:
        b = f.read()
        if len(b) >= 200 and b[:10] != b[-100:-90]:
            f.seek(0)
            f.write(b[-100:] + b[100:-100] + b[:100])
            sys.exit(0)
sys.exit(1)
]=] "${bad}" RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
        message(FATAL_ERROR "no part file with two distinct records to swap in ${bad}")
    endif()
    execute_process(COMMAND ${PYTHON} ${CHECKER} ${bad} --records ${records}
                    OUTPUT_VARIABLE out RESULT_VARIABLE rc TIMEOUT 120)
    if(NOT rc EQUAL 1)
        message(FATAL_ERROR "rs-sort-check took swapped records (exit ${rc}): ${out}")
    endif()
    file(REMOVE_RECURSE "${bad}" "${CHECK_DIR}")
endif()
