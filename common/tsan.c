/* The process's message channel of ThreadSanitizer builds (tsan.h). */
#include "common/tsan.h"

#ifdef RS_TSAN
char rs_tsan_channel;
#endif
