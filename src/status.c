/*
 * status.c - the messages of pb_status, generated from PB_STATUS_MAP so the
 * enum and the strings can never disagree.
 */
#include "pyramidkv/pyramidkv.h"

const char *pb_status_str(pb_status status) {
    switch (status) {
#define PB__STATUS_CASE(name, value, message) \
    case name:                                \
        return message;
        PB_STATUS_MAP(PB__STATUS_CASE)
#undef PB__STATUS_CASE
    default:
        return "unknown status";
    }
}
