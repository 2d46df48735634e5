# The test "no_fault_hooks": a library built without RS_FAULT_INJECTION (the
# Release and consumer default) must carry no fault hook. With the hooks
# OFF it checks the library itself; with them ON (test builds) it checks the
# library sources that mention a hook, compiled here once more without them,
# as a Release build would compile them (a full Release build is too slow
# for every check run). no_fault_hooks_detects proves the check can fail:
# run on a library with hooks, it must fail with its message (a missing file
# is not enough).
set(rs_hook_pattern "RSHUFFLE_[A-Z_]*FAULT|fault injection|rs_push_fault")
get_target_property(rs_lib_sources rshuffle_obj SOURCES)
set(rs_hook_sources)
foreach(src ${rs_lib_sources})
    if(src MATCHES "\\.c$")
        file(STRINGS ${src} rs_hits REGEX "RS_FAULT_INJECTION|${rs_hook_pattern}")
        if(rs_hits)
            list(APPEND rs_hook_sources ${src})
        endif()
    endif()
endforeach()

if(RS_FAULT_INJECTION AND rs_hook_sources)
    add_library(rs_nohooks OBJECT ${rs_hook_sources})
    target_include_directories(rs_nohooks PRIVATE ${PROJECT_SOURCE_DIR}/include
                                                  ${PROJECT_SOURCE_DIR})
    target_compile_definitions(rs_nohooks PRIVATE _GNU_SOURCE RS_BUILDING_LIBRARY)
    target_link_libraries(rs_nohooks PRIVATE rs_deps)
    set(rs_nohooks_files "$<JOIN:$<TARGET_OBJECTS:rs_nohooks>,|>")
    add_test(NAME no_fault_hooks_detects
             COMMAND ${CMAKE_COMMAND} "-DFILES=$<TARGET_FILE:rshuffle_shared>"
                     "-DPATTERN=${rs_hook_pattern}" -P ${PROJECT_SOURCE_DIR}/tests/no_fault_hooks.cmake)
    set_tests_properties(no_fault_hooks_detects PROPERTIES LABELS unit TIMEOUT 60
                         PASS_REGULAR_EXPRESSION "fault hooks compiled in")
else()
    set(rs_nohooks_files "$<TARGET_FILE:rshuffle_shared>")
endif()
add_test(NAME no_fault_hooks
         COMMAND ${CMAKE_COMMAND} "-DFILES=${rs_nohooks_files}" "-DPATTERN=${rs_hook_pattern}"
                 -P ${PROJECT_SOURCE_DIR}/tests/no_fault_hooks.cmake)
set_tests_properties(no_fault_hooks PROPERTIES LABELS unit TIMEOUT 60)
