/*
 * The library's version. RS_VERSION_* describe the headers a program was
 * compiled with; rs_version() the library it runs with (they differ when a
 * program runs against a newer shared library of the same major version).
 * The build reads the project version from this file.
 */
#ifndef RSHUFFLE_VERSION_H
#define RSHUFFLE_VERSION_H

#include <rshuffle/status.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RS_VERSION_MAJOR 0
#define RS_VERSION_MINOR 2
#define RS_VERSION_PATCH 0

/* One number that grows with every release: 0x00MMmmpp. */
#define RS_VERSION_NUMBER ((RS_VERSION_MAJOR << 16) | (RS_VERSION_MINOR << 8) | RS_VERSION_PATCH)

/*
 * Returns the running library's version as "MAJOR.MINOR.PATCH" (a static
 * string, never NULL, never freed). Cannot fail.
 */
RS_API const char *rs_version(void);

#ifdef __cplusplus
}
#endif

#endif
