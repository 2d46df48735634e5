/* The loopback backend's ops table (lb_backend.c), for lb_select.c. */
#ifndef RS_TESTS_LB_BACKEND_H
#define RS_TESTS_LB_BACKEND_H

#include "transport/backend.h"

extern const rs_backend_ops_t rs_lb_ops;

#endif
