/* Request ids and random numbers of a node: small helpers every part of it uses. */
#include "broadcast/internal.h"

#include <sys/random.h>
#include <unistd.h>

#include "broadcast/blocks.h"
#include "common/clock.h"

uint64_t rs_bc_random_seed(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v))
        v = rs_now_ns() ^ ((uint64_t)getpid() << 32);
    return v;
}

uint64_t rs_bc_random64(void)
{
    static __thread uint64_t state;
    static __thread int seeded;
    if (!seeded) {
        state = rs_bc_random_seed();
        seeded = 1;
    }
    return rs_bc_rand(&state);
}

uint32_t rs_bc_node_req_id(rs_bcast_node_t *node)
{
    pthread_mutex_lock(&node->lock);
    uint32_t id = node->next_req_id++;
    if (node->next_req_id == 0)
        node->next_req_id = 1;
    pthread_mutex_unlock(&node->lock);
    return id;
}
