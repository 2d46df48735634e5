/* Intrusive circular doubly-linked list (the rdma-core / UCX ucs_list idiom). */
#ifndef RS_COMMON_LIST_H
#define RS_COMMON_LIST_H

#include <stddef.h>

typedef struct rs_list {
    struct rs_list *prev, *next;
} rs_list_t;

#define RS_CONTAINER_OF(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

static inline void rs_list_init(rs_list_t *head)
{
    head->prev = head->next = head;
}

static inline int rs_list_empty(const rs_list_t *head)
{
    return head->next == head;
}

static inline void rs_list_insert_after(rs_list_t *pos, rs_list_t *elem)
{
    elem->prev = pos;
    elem->next = pos->next;
    pos->next->prev = elem;
    pos->next = elem;
}

/* Appends elem at the tail (oldest stays at head). */
static inline void rs_list_add_tail(rs_list_t *head, rs_list_t *elem)
{
    rs_list_insert_after(head->prev, elem);
}

static inline void rs_list_add_head(rs_list_t *head, rs_list_t *elem)
{
    rs_list_insert_after(head, elem);
}

static inline void rs_list_del(rs_list_t *elem)
{
    elem->prev->next = elem->next;
    elem->next->prev = elem->prev;
    elem->prev = elem->next = elem;
}

#define rs_list_first(head, type, member) RS_CONTAINER_OF((head)->next, type, member)

/* Iterates safely against removal of the current element. */
#define rs_list_for_each_safe(pos, tmp, head)                        \
    for ((pos) = (head)->next, (tmp) = (pos)->next; (pos) != (head); \
         (pos) = (tmp), (tmp) = (pos)->next)

#endif
