/*
 * worker/watch.c: this process's TCP listeners and their accept queues, as
 * the worker's listener watch reads them (socket diagnostics, /proc/net/tcp
 * where those are refused). A listener with two connections it never
 * accepted is listed with them waiting; another port given as skip_port is
 * left out; a closed listener is gone.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "worker/watch.h"

static int listener(uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(fd, 8), 0);
    socklen_t len = sizeof(sa);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    *port = ntohs(sa.sin_port);
    return fd;
}

static int find(const rs_wk_listening_t *v, int n, uint16_t port)
{
    for (int i = 0; i < n; i++)
        if (v[i].port == port)
            return i;
    return -1;
}

static void test_listeners_and_queues(void **state)
{
    (void)state;
    uint16_t pa, pb;
    int a = listener(&pa), b = listener(&pb);
    int c[2];
    for (int i = 0; i < 2; i++) {
        c[i] = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(pa)};
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        assert_int_equal(connect(c[i], (struct sockaddr *)&sa, sizeof(sa)), 0);
    }
    rs_wk_listening_t v[RS_WK_WATCH_PORTS];
    int n = rs_wk_listening(pb, v);
    assert_true(n >= 1);
    int i = find(v, n, pa);
    assert_true(i >= 0);
    assert_int_equal(v[i].waiting, 2);
    assert_int_equal(find(v, n, pb), -1); /* skipped */
    n = rs_wk_listening(0, v);
    assert_true(find(v, n, pb) >= 0 && v[find(v, n, pb)].waiting == 0);
    close(a);
    n = rs_wk_listening(0, v);
    assert_int_equal(find(v, n, pa), -1);
    assert_true(find(v, n, pb) >= 0);
    close(c[0]);
    close(c[1]);
    close(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_listeners_and_queues),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
