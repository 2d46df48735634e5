/*
 * Every public function called with NULL handles and NULL output pointers:
 * no crash; a call that returns a status says RS_ERR_INVALID, a void one
 * ignores the NULL, a getter returns its documented "none" value. Each call
 * runs in a child process, so one crash names its call and the walk goes on.
 * tests/common/check-api-listed (the test api_null_complete) checks that
 * every RS_API function of include/rshuffle/ is called here.
 *
 * "zeroed" stands for a handle that is not NULL but must not be touched: a
 * call given a NULL output pointer refuses it before it reads its handle.
 */
#include <rshuffle/broadcast.h>
#include <rshuffle/client.h>
#include <rshuffle/codec.h>
#include <rshuffle/config.h>
#include <rshuffle/log.h>
#include <rshuffle/pusher.h>
#include <rshuffle/reader.h>
#include <rshuffle/shuffle.h>
#include <rshuffle/status.h>
#include <rshuffle/transport.h>
#include <rshuffle/version.h>
#include <rshuffle/worker.h>

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

static int failures;
static void *zeroed; /* a zero-filled block standing for a handle */

/* Runs one call in a child: exit 0 when it returned what was expected. */
static void check(const char *what, int (*fn)(void))
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        static const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGSYS};
        for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
            signal(sigs[i], SIG_DFL); /* cmocka's handlers would report, not die */
        alarm(10);
        _exit(fn() ? 0 : 3);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (WIFSIGNALED(st)) {
        printf("FAIL %s: killed by signal %d\n", what, WTERMSIG(st));
        failures++;
    } else if (WEXITSTATUS(st) != 0) {
        printf("FAIL %s: wrong result\n", what);
        failures++;
    }
}

/* A call returning a status: it must be RS_ERR_INVALID. */
#define INVALID(name, expr)                                      \
    static int name(void)                                        \
    {                                                            \
        rs_status_t s_ = (expr);                                 \
        if (s_ != RS_ERR_INVALID)                                \
            fprintf(stderr, "%s: %s\n", #expr, rs_strerror(s_)); \
        return s_ == RS_ERR_INVALID;                             \
    }
/* A call returning a value: it must be want. */
#define RETURNS(name, expr, want) \
    static int name(void)         \
    {                             \
        return (expr) == (want);  \
    }
/* A void call: it must return. */
#define IGNORES(name, stmt) \
    static int name(void)   \
    {                       \
        stmt;               \
        return 1;           \
    }

#define Z(type) ((type *)zeroed)

static const char *const one_worker[] = {"127.0.0.1:1"};
static const rs_shuffle_desc_t desc = {
    .shuffle_id = 1, .n_partitions = 2, .n_workers = 1, .workers = one_worker};
static uint8_t buf[256];

/* status.h, version.h, log.h */
RETURNS(strerror_any, rs_strerror(-12345) != NULL, 1)
RETURNS(version, rs_version() != NULL, 1)
RETURNS(build_features, rs_build_features() != 0, 1)
RETURNS(log_level, rs_log_level() >= 0, 1)
IGNORES(log_set_level, rs_log_set_level(RS_LOG_WARN))
INVALID(log_level_parse_name, rs_log_level_parse(NULL, &(rs_log_level_t){0}))
INVALID(log_level_parse_out, rs_log_level_parse("warn", NULL))
IGNORES(log_set_handler, rs_log_set_handler(NULL, NULL))

/* config.h */
IGNORES(config_defaults, rs_config_defaults(NULL))
INVALID(config_from_env, rs_config_from_env(NULL))
INVALID(config_init, rs_config_init(NULL))
INVALID(config_validate, rs_config_validate(NULL))
INVALID(parse_size_s, rs_parse_size(NULL, &(uint64_t){0}))
INVALID(parse_size_out, rs_parse_size("1M", NULL))
INVALID(parse_uint_s, rs_parse_uint(NULL, 10, &(uint64_t){0}))
INVALID(parse_uint_out, rs_parse_uint("1", 10, NULL))
RETURNS(config_vars, rs_config_vars(NULL) > 0, 1)

/* codec.h */
RETURNS(codec_name, rs_codec_name((rs_codec_t)99) != NULL, 1)
INVALID(codec_from_name_name, rs_codec_from_name(NULL, &(rs_codec_t){0}))
INVALID(codec_from_name_out, rs_codec_from_name("lz4", NULL))
RETURNS(codec_bound, rs_codec_bound((rs_codec_t)99, 10), 0)
INVALID(codec_compress_src,
        rs_codec_compress(RS_CODEC_LZ4, NULL, 10, buf, sizeof(buf), &(size_t){0}))
INVALID(codec_compress_dst, rs_codec_compress(RS_CODEC_LZ4, buf, 10, NULL, 100, &(size_t){0}))
INVALID(codec_compress_out, rs_codec_compress(RS_CODEC_LZ4, buf, 10, buf + 20, 100, NULL))
INVALID(codec_decompress_src, rs_codec_decompress(RS_CODEC_LZ4, NULL, 10, buf, 10))
INVALID(codec_decompress_dst, rs_codec_decompress(RS_CODEC_LZ4, buf, 10, NULL, 10))
RETURNS(frame_bound, rs_frame_bound((rs_codec_t)99, 10), 0)
INVALID(frame_encode_ids,
        rs_frame_encode(RS_CODEC_NONE, 0, NULL, buf, 1, buf + 8, 200, &(size_t){0}))
INVALID(frame_encode_src,
        rs_frame_encode(RS_CODEC_NONE, 0, Z(rs_frame_ids_t), NULL, 1, buf, 200, &(size_t){0}))
INVALID(frame_encode_dst,
        rs_frame_encode(RS_CODEC_NONE, 0, Z(rs_frame_ids_t), buf, 1, NULL, 200, &(size_t){0}))
INVALID(frame_encode_out,
        rs_frame_encode(RS_CODEC_NONE, 0, Z(rs_frame_ids_t), buf, 1, buf + 8, 200, NULL))
INVALID(frame_seal_frame, rs_frame_seal(NULL, 200, 0, 0, Z(rs_frame_ids_t), &(size_t){0}))
INVALID(frame_seal_ids, rs_frame_seal(buf, 200, 0, 0, NULL, &(size_t){0}))
INVALID(frame_seal_out, rs_frame_seal(buf, 200, 0, 0, Z(rs_frame_ids_t), NULL))
INVALID(frame_parse_buf, rs_frame_parse(NULL, 64, Z(rs_frame_t)))
INVALID(frame_parse_out, rs_frame_parse(buf, 64, NULL))
INVALID(frame_verify_buf, rs_frame_verify(NULL, 64, Z(rs_frame_t)))
INVALID(frame_verify_out, rs_frame_verify(buf, 64, NULL))
INVALID(frame_decode_frame, rs_frame_decode(NULL, buf, sizeof(buf)))
INVALID(frame_decode_dst, rs_frame_decode(&(rs_frame_t){.raw_len = 5}, NULL, 10))
IGNORES(frame_iter_init, rs_frame_iter_init(NULL, buf, 10))
INVALID(frame_iter_next_it, rs_frame_iter_next(NULL, Z(rs_frame_t)))
INVALID(frame_iter_next_out, rs_frame_iter_next(Z(rs_frame_iter_t), NULL))
INVALID(pstream_open_params, rs_pstream_open(NULL, &(rs_pstream_t *){0}))
INVALID(pstream_open_out, rs_pstream_open(Z(rs_pstream_params_t), NULL))
INVALID(pstream_write, rs_pstream_write(NULL, buf, 1))
INVALID(pstream_finish, rs_pstream_finish(NULL, Z(rs_pstream_stats_t)))
IGNORES(pstream_destroy, rs_pstream_destroy(NULL))

/* shuffle.h */
RETURNS(placement_default, rs_placement_default(NULL, 1, 2, 0), 0)
INVALID(shuffle_place_desc, rs_shuffle_place(NULL, 0, &(uint32_t){0}))
INVALID(shuffle_place_out, rs_shuffle_place(&desc, 0, NULL))
INVALID(shuffle_replicas_desc, rs_shuffle_replicas(NULL, &(uint32_t){0}))
INVALID(shuffle_replicas_out, rs_shuffle_replicas(&desc, NULL))
INVALID(shuffle_replica_desc, rs_shuffle_replica(NULL, 0, 0, &(uint32_t){0}))
INVALID(shuffle_replica_out, rs_shuffle_replica(&desc, 0, 0, NULL))

/* transport.h */
INVALID(ctx_create_out, rs_ctx_create(NULL, NULL))
IGNORES(ctx_destroy, rs_ctx_destroy(NULL))
INVALID(ctx_renew, rs_ctx_renew(NULL))
RETURNS(ctx_renew_due, rs_ctx_renew_due(NULL), 0)
RETURNS(ctx_backend, rs_ctx_backend(NULL), NULL)
RETURNS(ctx_caps, rs_ctx_caps(NULL), 0)
RETURNS(ctx_config, rs_ctx_config(NULL), NULL)
RETURNS(progress, rs_progress(NULL), 0)
INVALID(wait_null, rs_wait(NULL, 0))
RETURNS(ctx_fd, rs_ctx_fd(NULL), -1)
INVALID(ctx_arm, rs_ctx_arm(NULL))
INVALID(progress_thread_start, rs_progress_thread_start(NULL))
IGNORES(progress_thread_stop, rs_progress_thread_stop(NULL))
INVALID(set_msg_handler, rs_set_msg_handler(NULL, 1, NULL, NULL))
IGNORES(set_notify_handler, rs_set_notify_handler(NULL, NULL, NULL))
IGNORES(set_ep_handler, rs_set_ep_handler(NULL, NULL, NULL))
INVALID(mem_alloc_ctx, rs_mem_alloc(NULL, 4096, RS_MEM_LOCAL, &(rs_mr_t *){0}))
INVALID(mem_alloc_out, rs_mem_alloc(Z(rs_ctx_t), 4096, RS_MEM_LOCAL, NULL))
INVALID(mem_reg_ctx, rs_mem_reg(NULL, buf, sizeof(buf), RS_MEM_LOCAL, &(rs_mr_t *){0}))
INVALID(mem_reg_out, rs_mem_reg(Z(rs_ctx_t), buf, sizeof(buf), RS_MEM_LOCAL, NULL))
IGNORES(mem_free, rs_mem_free(NULL))
RETURNS(mr_addr, rs_mr_addr(NULL), NULL)
RETURNS(mr_len, rs_mr_len(NULL), 0)
INVALID(mr_pack_rkey_mr, rs_mr_pack_rkey(NULL, buf, sizeof(buf), &(size_t){0}))
INVALID(mr_pack_rkey_out, rs_mr_pack_rkey(Z(rs_mr_t), buf, sizeof(buf), NULL))
INVALID(rkey_unpack_ep, rs_rkey_unpack(NULL, buf, 16, &(rs_rkey_t *){0}))
INVALID(rkey_unpack_out, rs_rkey_unpack(Z(rs_ep_t), buf, 16, NULL))
RETURNS(rkey_len, rs_rkey_len(NULL), 0)
IGNORES(rkey_destroy, rs_rkey_destroy(NULL))
INVALID(listen_ctx, rs_listen(NULL, "127.0.0.1", 0, &(rs_listener_t *){0}))
INVALID(listen_out, rs_listen(Z(rs_ctx_t), "127.0.0.1", 0, NULL))
RETURNS(listener_port, rs_listener_port(NULL), 0)
IGNORES(listener_destroy, rs_listener_destroy(NULL))
INVALID(connect_ctx, rs_connect(NULL, "127.0.0.1", 1, &(rs_ep_t *){0}))
INVALID(connect_host, rs_connect(Z(rs_ctx_t), NULL, 1, &(rs_ep_t *){0}))
INVALID(connect_out, rs_connect(Z(rs_ctx_t), "127.0.0.1", 1, NULL))
INVALID(ctx_address_ctx, rs_ctx_address(NULL, buf, sizeof(buf), &(size_t){0}))
INVALID(ctx_address_out, rs_ctx_address(Z(rs_ctx_t), buf, sizeof(buf), NULL))
INVALID(connect_address_ctx, rs_connect_address(NULL, buf, 16, &(rs_ep_t *){0}))
INVALID(connect_address_out, rs_connect_address(Z(rs_ctx_t), buf, 16, NULL))
IGNORES(ep_close, rs_ep_close(NULL))
INVALID(ep_status, rs_ep_status(NULL))
RETURNS(ep_peer_exited, rs_ep_peer_exited(NULL), 0)
RETURNS(ep_outstanding, rs_ep_outstanding(NULL), 0)
IGNORES(ep_set_user, rs_ep_set_user(NULL, NULL))
RETURNS(ep_user, rs_ep_user(NULL), NULL)
INVALID(put, rs_put(NULL, buf, 1, NULL, NULL, 0, NULL, NULL))
INVALID(put_notify, rs_put_notify(NULL, buf, 1, NULL, NULL, 0, 0, NULL, NULL))
INVALID(get, rs_get(NULL, buf, 1, NULL, NULL, 0, NULL, NULL))
INVALID(getv, rs_getv(NULL, &(rs_get_seg_t){buf, 1, 0}, 1, NULL, NULL, NULL, NULL))
INVALID(getv_seg, rs_getv(Z(rs_ep_t), NULL, 1, Z(rs_mr_t), Z(rs_rkey_t), NULL, NULL))
INVALID(fetch_add, rs_fetch_add(NULL, NULL, 0, 1, NULL, NULL, NULL))
INVALID(ep_flush, rs_ep_flush(NULL, NULL, NULL))
INVALID(msg_send, rs_msg_send(NULL, 1, buf, 1, NULL, NULL))

/* pusher.h */
IGNORES(pushq_config_defaults, rs_pushq_config_defaults(NULL))
INVALID(pushq_create_out, rs_pushq_create(NULL, NULL, NULL, NULL))
INVALID(pushq_buf_get_q, rs_pushq_buf_get(NULL, 64, &(rs_pbuf_t *){0}))
INVALID(pushq_buf_get_out, rs_pushq_buf_get(Z(rs_pushq_t), 64, NULL))
IGNORES(pushq_buf_put, rs_pushq_buf_put(NULL, NULL))
INVALID(pushq_swap, rs_pushq_swap(NULL, 0, NULL, 0, &(rs_pbuf_t *){0}))
INVALID(pushq_copy, rs_pushq_copy(NULL, 0, buf, 1))
IGNORES(pushq_release, rs_pushq_release(NULL, NULL))
INVALID(pushq_drain, rs_pushq_drain(NULL, 0))
IGNORES(pushq_destroy, rs_pushq_destroy(NULL))
IGNORES(pusher_config_defaults, rs_pusher_config_defaults(NULL))
INVALID(pusher_config_from_env, rs_pusher_config_from_env(NULL))
INVALID(pusher_open_desc, rs_pusher_open(NULL, 0, 0, NULL, &(rs_pusher_t *){0}))
INVALID(pusher_open_out, rs_pusher_open(&desc, 0, 0, NULL, NULL))
INVALID(pusher_append, rs_pusher_append(NULL, 0, buf, 1))
INVALID(pusher_reserve, rs_pusher_reserve(NULL, 0, 1, &(void *){NULL}))
INVALID(pusher_buf_get_p, rs_pusher_buf_get(NULL, 64, &(rs_pbuf_t *){0}))
INVALID(pusher_buf_get_out, rs_pusher_buf_get(Z(rs_pusher_t), 64, NULL))
IGNORES(pusher_buf_put, rs_pusher_buf_put(NULL, NULL))
INVALID(pusher_swap, rs_pusher_swap(NULL, 0, NULL, 0, &(rs_pbuf_t *){0}))
INVALID(pusher_close, rs_pusher_close(NULL, NULL))
IGNORES(pusher_destroy, rs_pusher_destroy(NULL))
INVALID(shuffle_drop, rs_shuffle_drop(NULL, NULL))
INVALID(pusher_open_in_client, rs_pusher_open_in(NULL, &desc, 0, 0, NULL, &(rs_pusher_t *){0}))
INVALID(pusher_open_in_desc,
        rs_pusher_open_in(Z(rs_client_t), NULL, 0, 0, NULL, &(rs_pusher_t *){0}))
INVALID(pusher_open_in_out, rs_pusher_open_in(Z(rs_client_t), &desc, 0, 0, NULL, NULL))
INVALID(pusher_warm_in_client, rs_pusher_warm_in(NULL, &desc, NULL, 1))
INVALID(pusher_warm_in_desc, rs_pusher_warm_in(Z(rs_client_t), NULL, NULL, 1))
INVALID(pusher_warm_desc, rs_pusher_warm(NULL, NULL, 1))

/* client.h */
IGNORES(client_config_defaults, rs_client_config_defaults(NULL))
INVALID(client_config_from_env, rs_client_config_from_env(NULL))
INVALID(client_create_out, rs_client_create(NULL, NULL))
IGNORES(client_destroy, rs_client_destroy(NULL))
IGNORES(client_stats_client, rs_client_stats(NULL, Z(rs_client_stats_t)))
IGNORES(client_stats_out, rs_client_stats(Z(rs_client_t), NULL))
/* No arguments to get wrong: the default client is made, then shut down twice. */
RETURNS(client_default, rs_client_default() != NULL, 1)
IGNORES(client_default_shutdown, (rs_client_default_shutdown(), rs_client_default_shutdown()))

/* worker.h */
IGNORES(worker_config_defaults, rs_worker_config_defaults(NULL))
INVALID(worker_config_from_env, rs_worker_config_from_env(NULL))
INVALID(worker_create_out, rs_worker_create(NULL, NULL, NULL))
INVALID(worker_listen, rs_worker_listen(NULL, "127.0.0.1", 0))
RETURNS(worker_port, rs_worker_port(NULL), 0)
INVALID(worker_name_w, rs_worker_name(NULL, (char *)buf, sizeof(buf)))
INVALID(worker_name_buf, rs_worker_name(Z(rs_worker_t), NULL, 64))
IGNORES(worker_stats_w, rs_worker_stats(NULL, Z(rs_worker_stats_t)))
IGNORES(worker_stats_out, rs_worker_stats(Z(rs_worker_t), NULL))
IGNORES(worker_destroy, rs_worker_destroy(NULL))
IGNORES(worker_drain, rs_worker_drain(NULL))
INVALID(worker_query_name, rs_worker_query(NULL, NULL, &(rs_worker_info_t *){0}))
INVALID(worker_query_out, rs_worker_query("127.0.0.1:1", NULL, NULL))
IGNORES(worker_info_free, rs_worker_info_free(NULL))
RETURNS(worker_draining, rs_worker_draining(NULL), 0)
INVALID(worker_request_drain_name, rs_worker_request_drain(NULL, NULL, NULL))

/* reader.h */
IGNORES(reader_config_defaults, rs_reader_config_defaults(NULL))
INVALID(reader_config_from_env, rs_reader_config_from_env(NULL))
INVALID(reader_session_open_desc,
        rs_reader_session_open(NULL, 1, NULL, NULL, &(rs_reader_session_t *){0}))
INVALID(reader_session_open_out, rs_reader_session_open(&desc, 1, NULL, NULL, NULL))
INVALID(reader_open_in_sess, rs_reader_open_in(NULL, 0, &(rs_reader_t *){0}))
INVALID(reader_open_in_out, rs_reader_open_in(Z(rs_reader_session_t), 0, NULL))
IGNORES(reader_session_close, rs_reader_session_close(NULL))
INVALID(reader_session_open_in_client,
        rs_reader_session_open_in(NULL, &desc, 1, NULL, NULL, &(rs_reader_session_t *){0}))
INVALID(reader_session_open_in_desc,
        rs_reader_session_open_in(Z(rs_client_t), NULL, 1, NULL, NULL, &(rs_reader_session_t *){0}))
INVALID(reader_session_open_in_out,
        rs_reader_session_open_in(Z(rs_client_t), &desc, 1, NULL, NULL, NULL))
INVALID(reader_warm_in_client, rs_reader_warm_in(NULL, &desc, NULL, 1))
INVALID(reader_warm_in_desc, rs_reader_warm_in(Z(rs_client_t), NULL, NULL, 1))
INVALID(reader_warm_desc, rs_reader_warm(NULL, NULL, 1))
INVALID(reader_open_desc, rs_reader_open(NULL, 0, 1, NULL, NULL, &(rs_reader_t *){0}))
INVALID(reader_open_out, rs_reader_open(&desc, 0, 1, NULL, NULL, NULL))
INVALID(reader_next_r, rs_reader_next(NULL, &(const void *){0}, &(uint32_t){0}))
INVALID(reader_next_rec, rs_reader_next(Z(rs_reader_t), NULL, &(uint32_t){0}))
INVALID(reader_next_len, rs_reader_next(Z(rs_reader_t), &(const void *){0}, NULL))
IGNORES(reader_stats_r, rs_reader_stats(NULL, Z(rs_reader_stats_t)))
IGNORES(reader_stats_out, rs_reader_stats(Z(rs_reader_t), NULL))
IGNORES(reader_close, rs_reader_close(NULL))

/* broadcast.h */
IGNORES(bcast_config_defaults, rs_bcast_config_defaults(NULL))
INVALID(bcast_config_from_env, rs_bcast_config_from_env(NULL))
INVALID(bcast_config_init, rs_bcast_config_init(NULL))
INVALID(bcast_config_validate, rs_bcast_config_validate(NULL))
INVALID(bcast_node_create_out, rs_bcast_node_create(NULL, NULL, NULL))
IGNORES(bcast_node_destroy, rs_bcast_node_destroy(NULL))
RETURNS(bcast_node_port, rs_bcast_node_port(NULL), 0)
IGNORES(bcast_node_stats_node, rs_bcast_node_stats(NULL, Z(rs_bcast_stats_t)))
IGNORES(bcast_node_stats_out, rs_bcast_node_stats(Z(rs_bcast_node_t), NULL))
INVALID(bcast_create_node, rs_bcast_create(NULL, 16, &(rs_bcast_t *){0}))
INVALID(bcast_create_out, rs_bcast_create(Z(rs_bcast_node_t), 16, NULL))
RETURNS(bcast_buffer, rs_bcast_buffer(NULL), NULL)
INVALID(bcast_seal, rs_bcast_seal(NULL))
INVALID(bcast_publish_node, rs_bcast_publish(NULL, buf, 16, &(rs_bcast_t *){0}))
INVALID(bcast_publish_out, rs_bcast_publish(Z(rs_bcast_node_t), buf, 16, NULL))
RETURNS(bcast_node_context, rs_bcast_node_context(NULL), NULL)
INVALID(bcast_publish_mr_node, rs_bcast_publish_mr(NULL, NULL, 16, &(rs_bcast_t *){0}))
INVALID(bcast_publish_mr_out, rs_bcast_publish_mr(Z(rs_bcast_node_t), Z(rs_mr_t), 16, NULL))
INVALID(bcast_descriptor_bc, rs_bcast_descriptor(NULL, buf, sizeof(buf), &(size_t){0}))
INVALID(bcast_descriptor_out, rs_bcast_descriptor(Z(rs_bcast_t), buf, sizeof(buf), NULL))
IGNORES(bcast_source_stats_bc, rs_bcast_source_stats(NULL, Z(rs_bcast_stats_t)))
IGNORES(bcast_source_stats_out, rs_bcast_source_stats(Z(rs_bcast_t), NULL))
IGNORES(bcast_destroy, rs_bcast_destroy(NULL))
INVALID(bcast_get_node, rs_bcast_get(NULL, buf, 16, &(rs_bcast_ref_t *){0}))
INVALID(bcast_get_desc, rs_bcast_get(Z(rs_bcast_node_t), NULL, 16, &(rs_bcast_ref_t *){0}))
INVALID(bcast_get_out, rs_bcast_get(Z(rs_bcast_node_t), buf, 16, NULL))
RETURNS(bcast_ref_data, rs_bcast_ref_data(NULL), NULL)
RETURNS(bcast_ref_len, rs_bcast_ref_len(NULL), 0)
IGNORES(bcast_ref_stats_ref, rs_bcast_ref_stats(NULL, Z(rs_bcast_stats_t)))
IGNORES(bcast_ref_stats_out, rs_bcast_ref_stats(Z(rs_bcast_ref_t), NULL))
IGNORES(bcast_release, rs_bcast_release(NULL))

#define C(fn)   \
    {           \
#fn, fn \
    }
static const struct {
    const char *name;
    int (*fn)(void);
} calls[] = {
    C(strerror_any),
    C(version),
    C(build_features),
    C(log_level),
    C(log_set_level),
    C(log_level_parse_name),
    C(log_level_parse_out),
    C(log_set_handler),
    C(config_defaults),
    C(config_from_env),
    C(config_init),
    C(config_validate),
    C(parse_size_s),
    C(parse_size_out),
    C(parse_uint_s),
    C(parse_uint_out),
    C(config_vars),
    C(codec_name),
    C(codec_from_name_name),
    C(codec_from_name_out),
    C(codec_bound),
    C(codec_compress_src),
    C(codec_compress_dst),
    C(codec_compress_out),
    C(codec_decompress_src),
    C(codec_decompress_dst),
    C(frame_bound),
    C(frame_encode_ids),
    C(frame_encode_src),
    C(frame_encode_dst),
    C(frame_encode_out),
    C(frame_seal_frame),
    C(frame_seal_ids),
    C(frame_seal_out),
    C(frame_parse_buf),
    C(frame_parse_out),
    C(frame_verify_buf),
    C(frame_verify_out),
    C(frame_decode_frame),
    C(frame_decode_dst),
    C(frame_iter_init),
    C(frame_iter_next_it),
    C(frame_iter_next_out),
    C(pstream_open_params),
    C(pstream_open_out),
    C(pstream_write),
    C(pstream_finish),
    C(pstream_destroy),
    C(placement_default),
    C(shuffle_place_desc),
    C(shuffle_place_out),
    C(shuffle_replicas_desc),
    C(shuffle_replicas_out),
    C(shuffle_replica_desc),
    C(shuffle_replica_out),
    C(ctx_create_out),
    C(ctx_destroy),
    C(ctx_renew),
    C(ctx_renew_due),
    C(ctx_backend),
    C(ctx_caps),
    C(ctx_config),
    C(progress),
    C(wait_null),
    C(ctx_fd),
    C(ctx_arm),
    C(progress_thread_start),
    C(progress_thread_stop),
    C(set_msg_handler),
    C(set_notify_handler),
    C(set_ep_handler),
    C(mem_alloc_ctx),
    C(mem_alloc_out),
    C(mem_reg_ctx),
    C(mem_reg_out),
    C(mem_free),
    C(mr_addr),
    C(mr_len),
    C(mr_pack_rkey_mr),
    C(mr_pack_rkey_out),
    C(rkey_unpack_ep),
    C(rkey_unpack_out),
    C(rkey_len),
    C(rkey_destroy),
    C(listen_ctx),
    C(listen_out),
    C(listener_port),
    C(listener_destroy),
    C(connect_ctx),
    C(connect_host),
    C(connect_out),
    C(ctx_address_ctx),
    C(ctx_address_out),
    C(connect_address_ctx),
    C(connect_address_out),
    C(ep_close),
    C(ep_status),
    C(ep_peer_exited),
    C(ep_outstanding),
    C(ep_set_user),
    C(ep_user),
    C(put),
    C(put_notify),
    C(get),
    C(getv),
    C(getv_seg),
    C(fetch_add),
    C(ep_flush),
    C(msg_send),
    C(pushq_config_defaults),
    C(pushq_create_out),
    C(pushq_buf_get_q),
    C(pushq_buf_get_out),
    C(pushq_buf_put),
    C(pushq_swap),
    C(pushq_copy),
    C(pushq_release),
    C(pushq_drain),
    C(pushq_destroy),
    C(pusher_config_defaults),
    C(pusher_config_from_env),
    C(pusher_open_desc),
    C(pusher_open_out),
    C(pusher_append),
    C(pusher_reserve),
    C(pusher_buf_get_p),
    C(pusher_buf_get_out),
    C(pusher_buf_put),
    C(pusher_swap),
    C(pusher_close),
    C(pusher_destroy),
    C(pusher_open_in_client),
    C(pusher_open_in_desc),
    C(pusher_open_in_out),
    C(pusher_warm_in_client),
    C(pusher_warm_in_desc),
    C(pusher_warm_desc),
    C(client_config_defaults),
    C(client_config_from_env),
    C(client_create_out),
    C(client_destroy),
    C(client_stats_client),
    C(client_stats_out),
    C(client_default),
    C(client_default_shutdown),
    C(shuffle_drop),
    C(worker_config_defaults),
    C(worker_config_from_env),
    C(worker_create_out),
    C(worker_listen),
    C(worker_port),
    C(worker_name_w),
    C(worker_name_buf),
    C(worker_stats_w),
    C(worker_stats_out),
    C(worker_destroy),
    C(worker_drain),
    C(worker_query_name),
    C(worker_query_out),
    C(worker_info_free),
    C(worker_draining),
    C(worker_request_drain_name),
    C(reader_config_defaults),
    C(reader_config_from_env),
    C(reader_session_open_desc),
    C(reader_session_open_out),
    C(reader_open_in_sess),
    C(reader_open_in_out),
    C(reader_session_close),
    C(reader_session_open_in_client),
    C(reader_session_open_in_desc),
    C(reader_session_open_in_out),
    C(reader_warm_in_client),
    C(reader_warm_in_desc),
    C(reader_warm_desc),
    C(reader_open_desc),
    C(reader_open_out),
    C(reader_next_r),
    C(reader_next_rec),
    C(reader_next_len),
    C(reader_stats_r),
    C(reader_stats_out),
    C(reader_close),
    C(bcast_config_defaults),
    C(bcast_config_from_env),
    C(bcast_config_init),
    C(bcast_config_validate),
    C(bcast_node_create_out),
    C(bcast_node_destroy),
    C(bcast_node_port),
    C(bcast_node_stats_node),
    C(bcast_node_stats_out),
    C(bcast_create_node),
    C(bcast_create_out),
    C(bcast_buffer),
    C(bcast_seal),
    C(bcast_publish_node),
    C(bcast_publish_out),
    C(bcast_node_context),
    C(bcast_publish_mr_node),
    C(bcast_publish_mr_out),
    C(bcast_descriptor_bc),
    C(bcast_descriptor_out),
    C(bcast_source_stats_bc),
    C(bcast_source_stats_out),
    C(bcast_destroy),
    C(bcast_get_node),
    C(bcast_get_desc),
    C(bcast_get_out),
    C(bcast_ref_data),
    C(bcast_ref_len),
    C(bcast_ref_stats_ref),
    C(bcast_ref_stats_out),
    C(bcast_release),
};

static void test_every_call_with_null(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++)
        check(calls[i].name, calls[i].fn);
    if (failures != 0)
        fail_msg("%d of %zu calls crashed or answered wrong (FAIL lines above)", failures,
                 sizeof(calls) / sizeof(calls[0]));
}

int main(void)
{
    zeroed = calloc(1, 1 << 20);
    assert_non_null(zeroed);
    rs_log_set_level(RS_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_call_with_null),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    free(zeroed);
    return rc;
}
