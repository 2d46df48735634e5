# The worker daemon: build/rshuffled (public headers only).
add_executable(rshuffled ${PROJECT_SOURCE_DIR}/worker/rshuffled.c ${PROJECT_SOURCE_DIR}/worker/sd_notify.c)
target_link_libraries(rshuffled PRIVATE rshuffle)
set_target_properties(rshuffled PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR})
