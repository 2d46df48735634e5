/*
 * Spilling: settled extents that no open snapshot pins are written to one
 * (already unlinked) file per shuffle until the data area is back below
 * its high-water mark, and freed.
 */
#include "worker/internal.h"

#include "common/assert.h"
#include "common/clock.h"
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* ---------------------------------------------------------------- spill */

#define SPILL_BACKOFF_NS RS_MS_TO_NS(100)   /* after a failure: no new attempt before */
#define SPILL_LOG_NS     RS_MS_TO_NS(10000) /* a failing disk: one line per 10 s at most */

/*
 * Every incident is said: its first failure at once, then at most one line
 * per SPILL_LOG_NS while it lasts (with how many were not); a disk that
 * fills, is cleaned and fills again shows each time.
 */
static rs_status_t spill_failed(rs_wk_store_t *st, const char *what, int err)
{
    uint64_t now = rs_now_coarse_ns();
    st->spill_errno = err;
    st->spill_again = now + SPILL_BACKOFF_NS;
    st->stats.spill_failures++;
    if (st->spill_log_ns != 0 && now - st->spill_log_ns < SPILL_LOG_NS) {
        st->spill_quiet++;
        return RS_ERR_IO;
    }
    rs_error("worker: spill failed: %s at %s (%s, errno %d; %u more failures since last said)",
             strerror(err), st->cfg.spill_dir, what, err, st->spill_quiet);
    st->spill_log_ns = now;
    st->spill_quiet = 0;
    return RS_ERR_IO;
}

/* One append-only file per shuffle: its partitions' batches by offset (a file per partition
 * made 1,009 files for a 1,009-partition shuffle, and creating them cost more than writing). */
static rs_status_t spill_open(rs_wk_store_t *st, wshuffle_t *sh)
{
    if (sh->spill_fd >= 0)
        return RS_OK;
    char path[RS_SPILL_DIR_MAX + 64];
    snprintf(path, sizeof(path), "%s/rshuffle-%d-%u.XXXXXX", st->cfg.spill_dir, (int)getpid(),
             sh->id);
    int fd = mkstemp(path);
    if (fd < 0)
        return spill_failed(st, "creating a spill file", errno);
    unlink(path); /* the data lives as long as the descriptor: nothing left after a crash */
    sh->spill_fd = fd;
    return RS_OK;
}

#define MERGED_SPILL_MAX 64 /* merged extents written in one call */

/*
 * Writes the n ranges of iov at off, all of them (pwritev may write part);
 * iov is used up: its entries are advanced past what was written.
 */
static rs_status_t writev_all(rs_wk_store_t *st, int fd, struct iovec *iov, uint32_t n,
                              uint64_t off)
{
    RS_ASSERT(n <= IOV_MAX);
    for (size_t left = 0;; off += left) {
        for (; n > 0 && left >= iov->iov_len; iov++, n--) /* written whole (or empty) */
            left -= iov->iov_len;
        if (n == 0)
            return RS_OK;
        iov->iov_base = (uint8_t *)iov->iov_base + left; /* written in part: the rest next */
        iov->iov_len -= left;
        ssize_t w = pwritev(fd, iov, (int)n, (off_t)off);
        if (w < 0 && errno == EINTR)
            w = 0;
        else if (w <= 0)
            return spill_failed(st, "writing", w < 0 ? errno : ENOSPC); /* 0: nothing fits */
        left = (size_t)w;
    }
}

static rs_status_t write_all(rs_wk_store_t *st, int fd, const void *buf, size_t len, uint64_t off)
{
    struct iovec v = {.iov_base = (void *)(uintptr_t)buf, .iov_len = len}; /* only read */
    return writev_all(st, fd, &v, 1, off);
}

/* Writes part's batches in extents being spilled to the file from *at on. */
static rs_status_t part_write(rs_wk_store_t *st, wshuffle_t *sh, const wpart_t *part, uint64_t *at)
{
    for (uint32_t i = 0; i < part->n_entries; i++) {
        const wentry_t *we = &part->entries[i];
        if (we->ext == NULL || !we->ext->spilling)
            continue;
        rs_status_t s = write_all(st, sh->spill_fd, st->arena + we->e.loc, we->e.len, *at);
        if (s != RS_OK)
            return s;
        *at += we->e.len;
    }
    return RS_OK;
}

/* Moves the entry we of extent e to the file at loc. */
static void entry_moved(rs_wk_store_t *st, extent_t *e, wentry_t *we, uint64_t loc)
{
    we->e.loc = loc;
    we->e.flags |= RS_SNAP_SPILLED;
    we->ext = NULL;
    st->stats.spilled_bytes += we->e.len;
    e->n_batches--;
}

/* Moves part's entries in extents being spilled to the file, in part_write's order. */
static void part_moved(rs_wk_store_t *st, wshuffle_t *sh, wpart_t *part)
{
    for (uint32_t i = 0; i < part->n_entries; i++) {
        wentry_t *we = &part->entries[i];
        extent_t *e = we->ext;
        if (e == NULL || !e->spilling)
            continue;
        RS_ASSERT(e->part == part); /* merged extents go by spill_merged */
        entry_moved(st, e, we, sh->spill_len);
        sh->spill_len += we->e.len;
    }
}

static void spill_worked(rs_wk_store_t *st)
{
    if (st->spill_errno == 0)
        return;
    rs_warn("worker: spilling to %s works again (%u failures since last said)", st->cfg.spill_dir,
            st->spill_quiet);
    st->spill_errno = 0;
    st->spill_log_ns = 0; /* the next failure is a new incident: said at once */
    st->spill_quiet = 0;
}

/*
 * Writes the committed batches of a settled, unpinned extent to its
 * partition's file and frees it. The entries move to the file only once
 * all of them are written, so a failed write leaves the extent as it was.
 */
static rs_status_t spill_extent(rs_wk_store_t *st, extent_t *e)
{
    wpart_t *part = e->part;
    wshuffle_t *sh = part->sh;
    if (e->n_batches > 0) {
        rs_status_t s = spill_open(st, sh);
        uint64_t at = sh->spill_len;
        e->spilling = 1;
        if (s == RS_OK)
            s = part_write(st, sh, part, &at);
        if (s == RS_OK)
            part_moved(st, sh, part);
        e->spilling = 0;
        if (s != RS_OK)
            return s;
        spill_worked(st);
    }
    rs_wk_extent_close(st, e);
    rs_wk_extent_free(st, e);
    return RS_OK;
}

/*
 * Moves e's frames to the file, where its grant's bytes were written at
 * base. Each frame names another partition, whose state and entry are
 * seldom in cache: both are fetched a few frames ahead.
 */
static void merged_moved(rs_wk_store_t *st, wshuffle_t *sh, extent_t *e, uint64_t base)
{
    for (uint32_t i = 0; i < e->n_frames; i++) {
        if (i + 8 < e->n_frames)
            __builtin_prefetch(&sh->parts[e->frames[i + 8].part], 0, 3);
        if (i + 4 < e->n_frames)
            __builtin_prefetch(&sh->parts[e->frames[i + 4].part].entries[e->frames[i + 4].entry], 1,
                               3);
        wpart_t *part = &sh->parts[e->frames[i].part];
        wentry_t *we = &part->entries[e->frames[i].entry];
        if (we->ext != e)
            continue;
        part->merged_entries--;
        entry_moved(st, e, we, base + (we->e.loc - e->off));
    }
}

/*
 * A merged extent's frames belong to many partitions. Each extent keeps
 * the list of its frames' entries, and its grant's bytes go to the file as
 * one range (the padding between frames too, under 64 bytes a frame, and
 * any frame copied out of the reserve): no walk of every partition's
 * entries, one write for up to MERGED_SPILL_MAX extents.
 * As for one extent, entries move only once all are written.
 * RS_ERR_NOT_FOUND: none can be spilled now.
 */
static rs_status_t spill_merged(rs_wk_store_t *st, wshuffle_t *sh, uint64_t need)
{
    uint64_t held = rs_wk_store_held(st);
    uint64_t want = need + (held > st->high_water ? held - st->high_water : 0);
    uint64_t chosen = 0, at = sh->spill_len;
    extent_t *ext[MERGED_SPILL_MAX];
    struct iovec iov[MERGED_SPILL_MAX];
    uint32_t n = 0;
    rs_list_t *pos, *tmp;
    rs_list_for_each_safe(pos, tmp, &sh->merged.extents)
    {
        extent_t *e = RS_CONTAINER_OF(pos, extent_t, link);
        if (e->live_grants > 0 || e->pins > 0 || e->n_batches == 0)
            continue; /* still landing, being read, or going once its grant settles */
        iov[n] = (struct iovec){.iov_base = st->arena + e->off, .iov_len = e->fill};
        ext[n++] = e;
        chosen += e->len;
        if (n == MERGED_SPILL_MAX || chosen >= want)
            break;
    }
    if (n == 0)
        return RS_ERR_NOT_FOUND;
    rs_status_t s = spill_open(st, sh);
    if (s == RS_OK)
        s = writev_all(st, sh->spill_fd, iov, n, sh->spill_len);
    if (s != RS_OK)
        return s; /* nothing moved: the extents stay as they were */
    for (uint32_t i = 0; i < n; i++) {
        merged_moved(st, sh, ext[i], at);
        at += ext[i]->fill;                /* what was written of it: iov is used up */
        RS_ASSERT(ext[i]->n_batches == 0); /* every frame of it is some partition's entry */
        rs_wk_extent_free(st, ext[i]);
    }
    sh->spill_len = at;
    spill_worked(st);
    return RS_OK;
}

static int spill_done(const rs_wk_store_t *st, uint64_t need)
{
    return rs_wk_store_held(st) <= st->high_water && rs_range_largest(&st->ra) >= need;
}

void rs_wk_store_trim(rs_wk_store_t *st)
{
    if (st->tails_made == st->tails_trimmed)
        return; /* every current extent was trimmed already: not a walk of every partition */
    st->tails_trimmed = st->tails_made;
    rs_list_t *spos, *stmp;
    rs_list_for_each_safe(spos, stmp, &st->shuffles)
    {
        wshuffle_t *sh = RS_CONTAINER_OF(spos, wshuffle_t, link);
        for (uint32_t p = 0; p < sh->n_partitions; p++) {
            extent_t *e = sh->parts[p].cur;
            if (e != NULL && e->fill < e->len) {
                rs_wk_extent_close(st, e);
                rs_wk_extent_maybe_free(st, e);
            }
        }
    }
}

void rs_wk_store_spill(rs_wk_store_t *st, uint64_t need)
{
    if (st->cfg.sink || spill_done(st, need))
        return;
    if (st->spill_errno != 0 && rs_now_coarse_ns() < st->spill_again)
        return; /* a failing disk is not written to on every grant */
    rs_wk_store_trim(st);
    rs_list_t *spos, *stmp;
    rs_list_for_each_safe(spos, stmp, &st->shuffles)
    {
        wshuffle_t *sh = RS_CONTAINER_OF(spos, wshuffle_t, link);
        /* Merged extents first: each frees a range a merged grant fits. */
        while (!spill_done(st, need)) {
            rs_status_t s = spill_merged(st, sh, need);
            if (s == RS_ERR_NOT_FOUND)
                break;
            if (s != RS_OK)
                return;
        }
        if (spill_done(st, need))
            return; /* merged extents sufficed: no walk of every partition */
        for (uint32_t p = 0; p < sh->n_partitions; p++) {
            wpart_t *part = &sh->parts[p];
            rs_list_t *pos, *tmp;
            rs_list_for_each_safe(pos, tmp, &part->extents)
            {
                if (spill_done(st, need))
                    return;
                extent_t *e = RS_CONTAINER_OF(pos, extent_t, link);
                /* Live grants still receive; pinned batches are being read at their offsets. */
                if (e->live_grants > 0 || e->pins > 0)
                    continue;
                if (spill_extent(st, e) != RS_OK)
                    return;
            }
        }
    }
}
