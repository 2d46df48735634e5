# rshuffle_info: version, build options, devices, configuration (public
# headers, plus UCX and libibverbs directly to list their devices). Its -v
# shows the commit and build type, from rs_build_info.h (rewritten at every
# build when they change).
add_custom_target(rs_build_info
                  COMMAND ${CMAKE_COMMAND} -DSRC=${PROJECT_SOURCE_DIR}
                          -DOUT=${CMAKE_BINARY_DIR}/tools/rs_build_info.h
                          -DTYPE=${CMAKE_BUILD_TYPE} -P ${PROJECT_SOURCE_DIR}/tools/build_info.cmake
                  BYPRODUCTS ${CMAKE_BINARY_DIR}/tools/rs_build_info.h VERBATIM)
add_executable(rshuffle_info ${PROJECT_SOURCE_DIR}/tools/rshuffle_info.c
                             ${PROJECT_SOURCE_DIR}/tools/info_worker.c)
add_dependencies(rshuffle_info rs_build_info)
target_include_directories(rshuffle_info PRIVATE ${CMAKE_BINARY_DIR}/tools)
target_link_libraries(rshuffle_info PRIVATE rshuffle)
target_compile_definitions(rshuffle_info PRIVATE _GNU_SOURCE $<$<BOOL:${RS_WITH_UCX}>:RS_HAVE_UCX>
                           $<$<BOOL:${RS_WITH_VERBS}>:RS_HAVE_VERBS>)
set_target_properties(rshuffle_info PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
