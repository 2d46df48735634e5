/* rs_version: the version this library was built as. */
#include <rshuffle/version.h>

#define RS_STR_(x) #x
#define RS_STR(x)  RS_STR_(x)

const char *rs_version(void)
{
    return RS_STR(RS_VERSION_MAJOR) "." RS_STR(RS_VERSION_MINOR) "." RS_STR(RS_VERSION_PATCH);
}
