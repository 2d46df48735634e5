/*
 * The transport conformance suite: the same tests for every backend.
 *
 *   test_transport_conformance [name-filter]      run the tests (cmocka)
 *   test_transport_conformance --role NAME ...     a child process (internal)
 *   test_transport_conformance --serve-roles HOST:PORT
 *                          on another host: runs the serving roles (targets,
 *                          servers) for a test run with RSHUFFLE_TEST_REMOTE
 *                          = HOST:PORT (harness.h, remote.c)
 *
 * Backend and fabric come from the environment: RSHUFFLE_TRANSPORT
 * (ucx|verbs), UCX_TLS for UCX, RSHUFFLE_TEST_HOST (127.0.0.1) for the
 * address to listen on and connect to. Bounds: RSHUFFLE_TEST_SLACK_MS,
 * RSHUFFLE_TEST_PEER_TIMEOUT_MS, RSHUFFLE_TEST_CONNECT_TIMEOUT_MS,
 * RSHUFFLE_TEST_ALARM_S (per test). RSHUFFLE_TEST_CONNECT=address: the fabric
 * cannot listen; every test connects by address blob. RSHUFFLE_TEST_REMOTE:
 * the serving roles run on the host whose role server listens there.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "suite.h"

/* Serving roles (true) run on the other host with RSHUFFLE_TEST_REMOTE; the rest here. */
static const h_role_t roles[] = {
    {"rma_target", role_rma_target, true},
    {"notify_target", role_notify_target, true},
    {"notify_putter", role_notify_putter, false},
    {"fadd_target", role_fadd_target, true},
    {"fadd_adder", role_fadd_adder, false},
    {"msg_server", role_msg_server, true},
    {"auth_server", role_auth_server, true},
    {"address_then_exit", role_address_then_exit, true},
    {"connect_dead", role_connect_dead, false},
    {NULL, NULL, false},
};

#define T(fn) cmocka_unit_test_setup_teardown(fn, h_setup, h_teardown)

int main(int argc, char **argv)
{
    h_set_roles(roles);
    if (argc >= 3 && strcmp(argv[1], "--role") == 0)
        return h_role_main(argc, argv);
    if (argc == 3 && strcmp(argv[1], "--serve-roles") == 0)
        return h_role_server(argv[2]);

    /* Without listeners (RSHUFFLE_TEST_CONNECT=address) the listener-only tests are left out. */
    const struct CMUnitTest all[] = {
        T(test_rkey_blob_and_range),
        T(test_put_get_listen),
        T(test_put_get_address),
        T(test_reused_ranges_stale_key),
        T(test_messages_listen),
        T(test_messages_address),
        T(test_event_fd_wakes),
        T(test_wrong_job_token),
        T(test_fetch_add_two_processes),
        T(test_notified_puts),
        T(test_connect_refused),
        T(test_connect_address_dead_peer),
        T(test_destroy_with_ops_in_flight),
        T(test_ep_close_with_ops_in_flight),
        T(test_peer_killed_during_puts),
        T(test_stopped_peer_times_out),
        T(test_timed_out_peer_resumes),
    };
    struct CMUnitTest tests[sizeof(all) / sizeof(all[0])];
    size_t n = 0;
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        bool needs_listen = all[i].test_func == test_put_get_listen ||
                            all[i].test_func == test_messages_listen ||
                            all[i].test_func == test_connect_refused;
        if (h_can_listen() || !needs_listen)
            tests[n++] = all[i];
    }
    if (argc >= 2)
        cmocka_set_test_filter(argv[1]);

    /* Name the backend and fabric in the group name, so logs say what ran. */
    rs_config_t cfg;
    h_config(&cfg);
    const char *tls = getenv("UCX_TLS");
    char name[256], remote[128] = "";
    if (h_remote() != NULL)
        snprintf(remote, sizeof(remote), ", serving roles on the role server at %s", h_remote());
    snprintf(name, sizeof(name),
             "transport conformance (RSHUFFLE_TRANSPORT=%s UCX_TLS=%s host %s%s%s)",
             cfg.transport == RS_TRANSPORT_UCX     ? "ucx"
             : cfg.transport == RS_TRANSPORT_VERBS ? "verbs"
                                                   : "auto",
             tls != NULL ? tls : "-", h_host(), h_can_listen() ? "" : ", connect by address only",
             remote);
    return _cmocka_run_group_tests(name, tests, n, NULL, NULL);
}
