# Every dependency comes from Debian's packages (scripts/install-deps).
find_package(PkgConfig REQUIRED)
find_package(Threads REQUIRED)
pkg_check_modules(UCX REQUIRED IMPORTED_TARGET ucx)
pkg_check_modules(IBVERBS REQUIRED IMPORTED_TARGET libibverbs)
pkg_check_modules(RDMACM REQUIRED IMPORTED_TARGET librdmacm)
pkg_check_modules(LZ4 REQUIRED IMPORTED_TARGET liblz4)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
pkg_check_modules(CMOCKA REQUIRED IMPORTED_TARGET cmocka)
pkg_check_modules(SNAPPY IMPORTED_TARGET snappy)
if(NOT SNAPPY_FOUND)
    find_path(SNAPPY_INCLUDE_DIR snappy-c.h REQUIRED)
    find_library(SNAPPY_LIBRARY snappy REQUIRED)
    add_library(PkgConfig::SNAPPY INTERFACE IMPORTED)
    target_include_directories(PkgConfig::SNAPPY INTERFACE ${SNAPPY_INCLUDE_DIR})
    target_link_libraries(PkgConfig::SNAPPY INTERFACE ${SNAPPY_LIBRARY})
endif()
# UCX's pkg-config file names only libucp; libucs (ucs_status_string and
# friends) is linked explicitly.
find_library(UCS_LIBRARY ucs REQUIRED)

add_library(rs_deps INTERFACE)
target_link_libraries(rs_deps INTERFACE PkgConfig::UCX ${UCS_LIBRARY} PkgConfig::IBVERBS
                      PkgConfig::RDMACM PkgConfig::LZ4 PkgConfig::SNAPPY PkgConfig::XXHASH
                      Threads::Threads m)
