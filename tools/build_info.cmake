# Writes OUT (rs_build_info.h) with the source tree's commit and the build
# type, rewriting it only when they change (run at every build, so a new
# commit shows without a new configure).
#   cmake -DSRC=... -DOUT=... -DTYPE=... -P build_info.cmake
set(commit unknown)
find_package(Git QUIET)
if(GIT_FOUND)
    execute_process(COMMAND ${GIT_EXECUTABLE} -C ${SRC} describe --always --dirty --abbrev=12
                    OUTPUT_VARIABLE out RESULT_VARIABLE rc ERROR_QUIET
                    OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(rc EQUAL 0 AND out)
        set(commit ${out})
    endif()
endif()
if(NOT TYPE)
    set(TYPE none)
endif()
set(text "#define RS_BUILD_COMMIT \"${commit}\"\n#define RS_BUILD_TYPE \"${TYPE}\"\n")
if(EXISTS ${OUT})
    file(READ ${OUT} old)
endif()
if(NOT "${old}" STREQUAL "${text}")
    file(WRITE ${OUT} "${text}")
endif()
