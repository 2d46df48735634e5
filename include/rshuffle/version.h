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
 * string, never NULL, never freed). Cannot fail; thread-safe.
 */
RS_API const char *rs_version(void);

/* What this library was built with (rs_build_features). */
#define RS_FEATURE_UCX             (1u << 0) /* the UCX backend (RS_WITH_UCX) */
#define RS_FEATURE_VERBS           (1u << 1) /* the verbs backend (RS_WITH_VERBS) */
#define RS_FEATURE_FAULT_INJECTION (1u << 2) /* test-only fault hooks (RS_FAULT_INJECTION) */

/* The RS_FEATURE_* bits of the running library. Cannot fail; thread-safe. */
RS_API unsigned rs_build_features(void);

#ifdef __cplusplus
}
#endif

#endif
