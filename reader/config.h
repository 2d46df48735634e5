/* The reader's configuration check (reader/config.c). */
#ifndef RS_READER_CONFIG_H
#define RS_READER_CONFIG_H

#include <rshuffle/reader.h>

/*
 * Brings a config built in code to what a session uses (read_max below one
 * grant, 16 MiB, raised to it; wait_ms 0: 30000, as reader.h documents),
 * then checks every field of the table against its variable's range.
 * RS_ERR_CONFIG, logged naming the field and its variable.
 */
rs_status_t rs_rd_config_check(rs_reader_config_t *cfg);

#endif
