/* rs_version, rs_build_features: what this library was built as. */
#include <rshuffle/version.h>

#define RS_STR_(x) #x
#define RS_STR(x)  RS_STR_(x)

const char *rs_version(void)
{
    return RS_STR(RS_VERSION_MAJOR) "." RS_STR(RS_VERSION_MINOR) "." RS_STR(RS_VERSION_PATCH);
}

unsigned rs_build_features(void)
{
    unsigned f = 0;
#ifdef RS_HAVE_UCX
    f |= RS_FEATURE_UCX;
#endif
#ifdef RS_HAVE_VERBS
    f |= RS_FEATURE_VERBS;
#endif
#ifdef RS_FAULT_INJECTION
    f |= RS_FEATURE_FAULT_INJECTION;
#endif
    return f;
}
