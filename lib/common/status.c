/*
 * status.c - a status's text and name, both read from CF_STATUS_TABLE in
 * cogfeed.h (the table that also gives the enum and Python's classes).
 */
#include "common.h"

const char *cf_strerror(cf_status s) {
#define CF__STATUS_TEXT_ROW(id, value, text, doc, pyclass, pybase) \
    case id: return text;
    switch (s) { CF_STATUS_TABLE(CF__STATUS_TEXT_ROW) }
#undef CF__STATUS_TEXT_ROW
    if (s == CF__NEED_BYTES) return "more bytes needed";
    return "unknown error";
}

const char *cf_status_name(cf_status s) {
#define CF__STATUS_NAME_ROW(id, value, text, doc, pyclass, pybase) \
    case id: return #id;
    switch (s) { CF_STATUS_TABLE(CF__STATUS_NAME_ROW) }
#undef CF__STATUS_NAME_ROW
    return NULL;
}
