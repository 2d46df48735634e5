/* The process-local registry of worker arenas (shuffle/local.h). */
#include "shuffle/local.h"

#include <rshuffle/shuffle.h>

#include "common/log.h"
#include "shuffle/name.h"
#include "shuffle/proto.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct rs_local_reg {
    rs_local_reg_t *next;
    char host[64]; /* "" for any host */
    uint16_t port;
    uint8_t key[RS_LOCAL_KEY_MAX];
    size_t key_len;
    uint8_t *base;
    uint64_t len;
    uint32_t holds; /* lookups not yet released */
    int gone;       /* unregistered while held: the last release frees it */
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static rs_local_reg_t *regs;

static int wildcard(const char *host)
{
    return host == NULL || host[0] == '\0' || strcmp(host, "0.0.0.0") == 0 ||
           strcmp(host, "::") == 0 || strcmp(host, "[::]") == 0;
}

rs_status_t rs_sproto_local_register(const char *host, uint16_t port, const void *key,
                                     size_t key_len, void *base, uint64_t len,
                                     rs_local_reg_t **reg_p)
{
    if (port == 0 || key == NULL || key_len == 0 || key_len > RS_LOCAL_KEY_MAX || base == NULL ||
        (!wildcard(host) && strlen(host) >= sizeof(((rs_local_reg_t *)0)->host)))
        return RS_ERR_INVALID;
    rs_local_reg_t *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return RS_ERR_NOMEM;
    if (!wildcard(host))
        strcpy(r->host, host);
    r->port = port;
    memcpy(r->key, key, key_len);
    r->key_len = key_len;
    r->base = base;
    r->len = len;
    pthread_mutex_lock(&reg_lock);
    r->next = regs;
    regs = r;
    pthread_mutex_unlock(&reg_lock);
    *reg_p = r;
    return RS_OK;
}

void rs_sproto_local_unregister(rs_local_reg_t *reg)
{
    if (reg == NULL)
        return;
    pthread_mutex_lock(&reg_lock);
    for (rs_local_reg_t **at = &regs; *at != NULL; at = &(*at)->next) {
        if (*at == reg) {
            *at = reg->next;
            break;
        }
    }
    uint32_t holds = reg->holds;
    uint16_t port = reg->port;
    reg->gone = holds > 0;
    pthread_mutex_unlock(&reg_lock);
    if (holds > 0)
        rs_error("shuffle: worker at port %u destroyed while %u local readers read its arena "
                 "in place (close them first)",
                 port, holds);
    else
        free(reg);
}

rs_status_t rs_sproto_local_lookup(const char *addr, const void *key, size_t key_len,
                                   const uint8_t **base_p, uint64_t *len_p, rs_local_reg_t **reg_p)
{
    char host[RS_SHUFFLE_ADDR_MAX] = "";
    uint16_t port = 0;
    /* A blob name is this process's context address: the arena's key alone identifies it. */
    int by_key = rs_sproto_name_is_blob(addr);
    if (addr == NULL || key == NULL ||
        (!by_key && rs_sproto_addr_split(addr, host, sizeof(host), &port) != RS_OK))
        return RS_ERR_NOT_FOUND;
    rs_status_t st = RS_ERR_NOT_FOUND;
    pthread_mutex_lock(&reg_lock);
    for (rs_local_reg_t *r = regs; r != NULL; r = r->next) {
        if (r->key_len != key_len || memcmp(r->key, key, key_len) != 0)
            continue;
        if (!by_key && (r->port != port || (r->host[0] != '\0' && strcmp(r->host, host) != 0)))
            continue;
        r->holds++;
        *base_p = r->base;
        *len_p = r->len;
        *reg_p = r;
        st = RS_OK;
        break;
    }
    pthread_mutex_unlock(&reg_lock);
    return st;
}

void rs_sproto_local_release(rs_local_reg_t *reg)
{
    if (reg == NULL)
        return;
    pthread_mutex_lock(&reg_lock);
    int last = --reg->holds == 0 && reg->gone;
    pthread_mutex_unlock(&reg_lock);
    if (last)
        free(reg);
}
