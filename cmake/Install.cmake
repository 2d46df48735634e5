# Installation (GNUInstallDirs): the static and shared library, the public
# headers, the programs that exist in this build, docs, rshuffle.pc and the
# CMake package (rshuffle::rshuffle = shared, rshuffle::rshuffle_static).
include(CMakePackageConfigHelpers)

install(TARGETS rshuffle rshuffle_shared rs_deps EXPORT rshuffleTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/rshuffle
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")

# Programs: whichever of them this configuration builds.
foreach(program rshuffled rshuffle_info rs-shuffle-bench rs-bcast-bench rs-perf-swap
                rs-perf-reserve rs-perf-codec rs-perf-transport rs-bench-notify)
    if(TARGET ${program})
        install(TARGETS ${program} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
    endif()
endforeach()

install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}
        FILES_MATCHING PATTERN "*.md")
if(EXISTS ${PROJECT_SOURCE_DIR}/man)
    foreach(section 1 7)
        file(GLOB pages ${PROJECT_SOURCE_DIR}/man/*.${section})
        if(pages)
            install(FILES ${pages} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section})
        endif()
    endforeach()
endif()

# pkg-config: relocatable (prefix from the .pc file's own place).
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
