# rshuffle_info: version, build options, devices, configuration (public
# headers, plus UCX and libibverbs directly to list their devices).
add_executable(rshuffle_info ${PROJECT_SOURCE_DIR}/tools/rshuffle_info.c
                             ${PROJECT_SOURCE_DIR}/tools/info_worker.c)
target_link_libraries(rshuffle_info PRIVATE rshuffle)
target_compile_definitions(rshuffle_info PRIVATE _GNU_SOURCE $<$<BOOL:${RS_WITH_UCX}>:RS_HAVE_UCX>
                           $<$<BOOL:${RS_WITH_VERBS}>:RS_HAVE_VERBS>)
set_target_properties(rshuffle_info PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
