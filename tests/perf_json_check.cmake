# The perf smoke check: runs a driver and checks the JSON object its last
# stdout line must be (shape only; the bars are for full runs): the one
# schema of perf/perf_json.h, {"meta": {...}, "results": [...]}.
#
#   cmake "-DCMD=prog;arg;..." [-DFIELDS=a;b] [-DRESULTS=n] [-DRESULT_FIELDS=a;b]
#         [-DEXPECT=key=value;...] [-DTIMEOUT=s] -P perf_json_check.cmake
#
# "meta" must carry program, version, commit, host, backend, transport,
# ucx_version and command. FIELDS: keys that must be present and not empty.
# RESULTS: how many entries "results" must have. RESULT_FIELDS: keys every
# entry of "results" must carry, not empty (with either, "results" must have
# an entry). EXPECT: key=value pairs that must hold exactly (booleans read
# ON/OFF). A key of FIELDS or EXPECT is a path: results.0.ok is the first
# result's "ok".
# A smoke script with plausibility checks of its own sets these variables and
# include()s this file instead; it then finds the line in `last` and the
# number of results (or 0) in `n`.
if(NOT DEFINED TIMEOUT)
    set(TIMEOUT 600)
endif()
list(GET CMD 0 prog)
get_filename_component(prog "${prog}" NAME)
execute_process(COMMAND ${CMD} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc
                TIMEOUT ${TIMEOUT})
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${prog} exited with ${rc}:\n${out}\n${err}")
endif()
string(STRIP "${out}" out)
string(REGEX REPLACE ".*\n" "" last "${out}")
string(JSON type ERROR_VARIABLE jerr TYPE "${last}")
if(jerr)
    message(FATAL_ERROR "${prog}: last line is not JSON: ${jerr}\n${last}")
elseif(NOT type STREQUAL "OBJECT")
    message(FATAL_ERROR "${prog}: last line is a JSON ${type}, not an object:\n${last}")
endif()

foreach(key program version commit host backend transport ucx_version command)
    string(JSON v ERROR_VARIABLE jerr GET "${last}" meta ${key})
    if(jerr)
        message(FATAL_ERROR "${prog}: last line has no meta.${key}: ${last}")
    endif()
endforeach()
foreach(key ${FIELDS})
    string(REPLACE "." ";" path "${key}")
    string(JSON v ERROR_VARIABLE jerr GET "${last}" ${path})
    if(jerr OR "${v}" STREQUAL "")
        message(FATAL_ERROR "${prog}: last line has no ${key}: ${last}")
    endif()
endforeach()
foreach(kv ${EXPECT})
    string(REPLACE "=" ";" kv "${kv}")
    list(GET kv 0 key)
    list(GET kv 1 want)
    string(REPLACE "." ";" path "${key}")
    string(JSON v ERROR_VARIABLE jerr GET "${last}" ${path})
    if(jerr OR NOT "${v}" STREQUAL "${want}")
        message(FATAL_ERROR "${prog}: ${key} is '${v}', expected ${want}: ${last}")
    endif()
endforeach()

set(n 0)
if(DEFINED RESULTS OR RESULT_FIELDS)
    string(JSON n ERROR_VARIABLE jerr LENGTH "${last}" results)
    if(jerr)
        message(FATAL_ERROR "${prog}: last line is not {\"results\": [...]}: ${jerr}\n${last}")
    endif()
    if(DEFINED RESULTS AND NOT n EQUAL RESULTS)
        message(FATAL_ERROR "${prog}: expected ${RESULTS} results, got ${n}: ${last}")
    endif()
    if(n EQUAL 0)
        message(FATAL_ERROR "${prog}: no results: ${last}")
    endif()
    math(EXPR last_i "${n} - 1")
    foreach(i RANGE ${last_i})
        foreach(key ${RESULT_FIELDS})
            string(JSON v ERROR_VARIABLE jerr GET "${last}" results ${i} ${key})
            if(jerr OR "${v}" STREQUAL "")
                message(FATAL_ERROR "${prog}: result ${i} has no ${key}: ${last}")
            endif()
        endforeach()
    endforeach()
endif()
message(STATUS "${prog} JSON shape ok (${n} results)")
