# Every dependency comes from Debian's packages (scripts/install-deps).
# rshuffleConfig.cmake.in repeats the library's part of this list for
# consumers of the static library.
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
set(rs_dep_targets PkgConfig::LZ4 PkgConfig::SNAPPY PkgConfig::XXHASH Threads::Threads m)
if(RS_WITH_UCX)
    pkg_check_modules(UCX REQUIRED IMPORTED_TARGET ucx)
    # UCX's pkg-config file names only libucp; libucs (ucs_status_string and
    # friends) is linked explicitly.
    find_library(UCS_LIBRARY ucs REQUIRED)
    list(APPEND rs_dep_targets PkgConfig::UCX ${UCS_LIBRARY})
endif()
if(RS_WITH_VERBS)
    pkg_check_modules(IBVERBS REQUIRED IMPORTED_TARGET libibverbs)
    pkg_check_modules(RDMACM REQUIRED IMPORTED_TARGET librdmacm)
    list(APPEND rs_dep_targets PkgConfig::IBVERBS PkgConfig::RDMACM)
endif()
pkg_check_modules(LZ4 REQUIRED IMPORTED_TARGET liblz4)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
pkg_check_modules(SNAPPY REQUIRED IMPORTED_TARGET snappy)
if(RS_BUILD_TESTS)
    pkg_check_modules(CMOCKA REQUIRED IMPORTED_TARGET cmocka)
endif()

# The static library's link flags for rshuffle.pc's Libs.private.
set(rs_pc_libs_private ${LZ4_LDFLAGS} ${SNAPPY_LDFLAGS} ${XXHASH_LDFLAGS})
if(RS_WITH_UCX)
    list(APPEND rs_pc_libs_private ${UCX_LDFLAGS} -lucs)
endif()
if(RS_WITH_VERBS)
    list(APPEND rs_pc_libs_private ${IBVERBS_LDFLAGS} ${RDMACM_LDFLAGS})
endif()
list(REMOVE_DUPLICATES rs_pc_libs_private)

add_library(rs_deps INTERFACE)
target_link_libraries(rs_deps INTERFACE ${rs_dep_targets})
