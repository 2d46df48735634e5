/*
 * ThreadSanitizer annotations (a no-op in other builds). A message or a
 * notified put orders the sender's earlier writes before the receiver's
 * handler, through UCX's queues, which TSan does not see into (UCX is not
 * instrumented): the transport releases this process's channel before it
 * sends a message (transport/msgsend.c) or a put's notification (the UCX
 * backend, transport/ucx/rma.c, once the put's bytes are in place) and
 * acquires it before it delivers one (transport/msg.c), so TSan sees the
 * ordering the fabric gives.
 */
#ifndef RS_COMMON_TSAN_H
#define RS_COMMON_TSAN_H

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RS_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define RS_TSAN 1
#endif

#ifdef RS_TSAN
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
extern char rs_tsan_channel;
#define RS_TSAN_RELEASE() __tsan_release(&rs_tsan_channel)
#define RS_TSAN_ACQUIRE() __tsan_acquire(&rs_tsan_channel)
#else
#define RS_TSAN_RELEASE() ((void)0)
#define RS_TSAN_ACQUIRE() ((void)0)
#endif

#endif
