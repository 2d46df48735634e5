# Installation (GNUInstallDirs): the static and shared library, the public
# headers, the programs that exist in this build, docs, rshuffle.pc and the
# CMake package (rshuffle::rshuffle = shared, rshuffle::rshuffle_static).
include(CMakePackageConfigHelpers)

# A library for use never carries the test-only fault-injection hooks: a
# build with them (this repository's test builds) refuses to install, before
# anything is copied. make install (scripts/install-build) builds without.
if(RS_FAULT_INJECTION)
    install(CODE "message(FATAL_ERROR \"rshuffle: this build has fault-injection hooks \
(RS_FAULT_INJECTION=ON, a test build) and is not installed; use make install, \
or configure with -DCMAKE_BUILD_TYPE=Release -DRS_FAULT_INJECTION=OFF\")")
endif()

install(TARGETS rshuffle rshuffle_shared rs_deps EXPORT rshuffleTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/rshuffle
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")

# Programs: whichever of them this configuration builds.
foreach(program rshuffled rshuffle_info rs-shuffle-bench rs-bcast-bench rs-sort rs-perf-swap
                rs-perf-reserve rs-perf-codec rs-perf-transport rs-bench-notify)
    if(TARGET ${program})
        install(TARGETS ${program} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
    endif()
endforeach()
# rs-sort's output checker (it knows only the record layout).
install(PROGRAMS ${PROJECT_SOURCE_DIR}/perf/rs-sort-check DESTINATION ${CMAKE_INSTALL_BINDIR})

# Docs in the repository's own layout (README.md beside docs/ and examples/),
# so the README's and the docs' relative links hold in the installed tree.
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/CONTRIBUTING.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs
        FILES_MATCHING PATTERN "*.md" PATTERN "*.png")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples
        FILES_MATCHING PATTERN "*.c" PATTERN "CMakeLists.txt" PATTERN "Makefile")
# Section 3: one page per public header, rshuffle_NAME(3), generated from the
# header's comments at build time (man/gen-man3); the test man3_complete
# checks that every RS_API function has its entry.
file(GLOB rs_public_headers ${PROJECT_SOURCE_DIR}/include/rshuffle/*.h)
set(rs_man3_pages)
foreach(header ${rs_public_headers})
    get_filename_component(name ${header} NAME_WE)
    set(page ${PROJECT_BINARY_DIR}/man/rshuffle_${name}.3)
    add_custom_command(OUTPUT ${page}
                       COMMAND ${PROJECT_SOURCE_DIR}/man/gen-man3 ${header} ${PROJECT_VERSION} ${page}
                       DEPENDS ${header} ${PROJECT_SOURCE_DIR}/man/gen-man3 VERBATIM)
    list(APPEND rs_man3_pages ${page})
endforeach()
file(MAKE_DIRECTORY ${PROJECT_BINARY_DIR}/man)
add_custom_target(rs_man3 ALL DEPENDS ${rs_man3_pages})
install(FILES ${rs_man3_pages} DESTINATION ${CMAKE_INSTALL_MANDIR}/man3)

if(EXISTS ${PROJECT_SOURCE_DIR}/man)
    foreach(section 1 7)
        file(GLOB pages ${PROJECT_SOURCE_DIR}/man/*.${section})
        if(pages)
            install(FILES ${pages} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section})
        endif()
    endforeach()
endif()

# pkg-config: relocatable (prefix from the .pc file's own place). The
# dependencies are link flags (Libs.private), not Requires.private: a
# program linking the shared library needs none of their -dev packages.
list(JOIN rs_pc_libs_private " " rs_pc_libs_private)
file(RELATIVE_PATH rs_pc_prefix_rel
     ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
configure_file(${PROJECT_SOURCE_DIR}/cmake/rshuffle.pc.in ${PROJECT_BINARY_DIR}/rshuffle.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/rshuffle.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# CMake package.
set(rs_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/rshuffle)
install(EXPORT rshuffleTargets NAMESPACE rshuffle:: DESTINATION ${rs_cmake_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/rshuffleConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/rshuffleConfig.cmake
                              INSTALL_DESTINATION ${rs_cmake_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/rshuffleConfigVersion.cmake
                                 COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/rshuffleConfig.cmake
              ${PROJECT_BINARY_DIR}/rshuffleConfigVersion.cmake DESTINATION ${rs_cmake_dir})

# The systemd unit of rshuffled (worker/systemd), its ExecStart in the
# installed bindir: made at install time, so --prefix and DESTDIR hold.
if(TARGET rshuffled)
    install(CODE "
        set(RS_BINDIR \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}\")
        configure_file(\"${PROJECT_SOURCE_DIR}/worker/systemd/rshuffled.service.in\"
                       \"${PROJECT_BINARY_DIR}/rshuffled.service\" @ONLY)")
    install(FILES ${PROJECT_BINARY_DIR}/rshuffled.service DESTINATION lib/systemd/system)
endif()
