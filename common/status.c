#include <rshuffle/status.h>

const char *rs_strerror(rs_status_t status)
{
    switch (status) {
        case RS_OK:
            return "success";
        case RS_ERR_INVALID:
            return "invalid argument";
        case RS_ERR_NOMEM:
            return "out of memory";
        case RS_ERR_IO:
            return "I/O error";
        case RS_ERR_CONFIG:
            return "invalid configuration";
        case RS_ERR_UNSUPPORTED:
            return "not supported";
        case RS_ERR_BUSY:
            return "resource temporarily exhausted";
        case RS_ERR_TIMEOUT:
            return "timed out";
        case RS_ERR_CANCELED:
            return "canceled";
        case RS_ERR_NOT_FOUND:
            return "not found";
        case RS_ERR_EXISTS:
            return "already exists";
        case RS_ERR_NO_SPACE:
            return "buffer too small";
        case RS_ERR_STATE:
            return "invalid in the current state";
        case RS_ERR_TRANSPORT:
            return "transport error";
        case RS_ERR_UNREACHABLE:
            return "peer unreachable";
        case RS_ERR_REFUSED:
            return "connection refused";
        case RS_ERR_AUTH:
            return "job token mismatch";
        case RS_ERR_BAD_RKEY:
            return "invalid remote key";
        case RS_ERR_OUT_OF_RANGE:
            return "remote range outside registered region";
        case RS_ERR_MSG_SIZE:
            return "message too long";
        case RS_ERR_TRUNCATED:
            return "truncated input";
        case RS_ERR_BAD_MAGIC:
            return "bad magic";
        case RS_ERR_BAD_VERSION:
            return "unsupported version";
        case RS_ERR_BAD_CODEC:
            return "unknown codec";
        case RS_ERR_BAD_LENGTH:
            return "length field out of bounds";
        case RS_ERR_CHECKSUM:
            return "checksum mismatch";
        case RS_ERR_DECOMPRESS:
            return "decompression failed";
        case RS_ERR_PROTOCOL:
            return "protocol error";
        case RS_ERR_BACKPRESSURE:
            return "worker out of memory (backpressure)";
        case RS_ERR_DESTROYED:
            return "destroyed";
    }
    return "unknown status";
}
