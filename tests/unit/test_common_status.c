/*
 * test_common_status.c - the status table (CF_STATUS_TABLE in cogfeed.h)
 * and what it generates in C: the enum's values, cf_status_name() and
 * cf_strerror(); and that cf__err fills a whole cf_error.
 * tests/python/test_errors.py checks the Python classes
 * against the same table.
 */
#include "common/common.h"
#include "cf_test.h"

#include <string.h>

#define ROW(id, value, text, doc, pyclass, pybase) {id, value, #id, text, doc, pyclass, pybase},
static const struct {
    cf_status st;
    int value;
    const char *id, *text, *doc, *pyclass, *pybase;
} rows[] = {CF_STATUS_TABLE(ROW)};
#undef ROW
#define NROWS (int)(sizeof rows / sizeof rows[0])

int main(void) {
    CHECK(NROWS == 16);
    for (int i = 0; i < NROWS; i++) {
        /* The enum constant has the row's value, and the values are 0, 1,
         * ... in order, with no gap and no repeat. */
        CHECK((int)rows[i].st == rows[i].value);
        CHECK(rows[i].value == i);
        const char *name = cf_status_name(rows[i].st);
        CHECK(name && !strcmp(name, rows[i].id));
        CHECK(!strcmp(cf_strerror(rows[i].st), rows[i].text));
        CHECK(rows[i].doc[0] && rows[i].text[0]);
        /* Every error has a Python class; OK and END, not errors, none. */
        int error = rows[i].st != CF_OK && rows[i].st != CF_E_END;
        CHECK(!!rows[i].pyclass[0] == error);
        CHECK(rows[i].pyclass[0] || !rows[i].pybase[0]);
        for (int j = 0; j < i; j++) {
            CHECK(strcmp(rows[i].text, rows[j].text) != 0);
            CHECK(strcmp(rows[i].pyclass, rows[j].pyclass) != 0 || !error);
        }
        printf("%2d %-17s %-30s %s\n", rows[i].value, name ? name : "(null)", rows[i].text,
               rows[i].pyclass);
    }
    /* The names spelled out, so that the table's ID column is the enum's. */
    CHECK(!strcmp(cf_status_name(CF_OK), "CF_OK"));
    CHECK(!strcmp(cf_status_name(CF_E_NOTFOUND), "CF_E_NOTFOUND"));
    CHECK(!strcmp(cf_status_name(CF_E_END), "CF_E_END"));
    CHECK(!strcmp(cf_strerror(CF_E_FORMAT), "malformed TIFF"));
    /* Values outside the table: no name, a text that says so. */
    CHECK(cf_status_name((cf_status)NROWS) == NULL);
    CHECK(cf_status_name((cf_status)-1) == NULL);
    CHECK(cf_status_name(CF__NEED_BYTES) == NULL);
    CHECK(!strcmp(cf_strerror((cf_status)NROWS), "unknown error"));
    CHECK(!strcmp(cf_strerror(CF__NEED_BYTES), "more bytes needed"));

    /* cf__err describes a new failure whole: a caller's cf_error left
     * uninitialised (read_many.c's locals) must not pass its garbage on
     * as the HTTP status (Python showed http_status 32767). */
    cf_error e;
    memset(&e, 0x5a, sizeof e);
    CHECK(cf__err(&e, CF_E_LIMIT, "%s: too big", "a.tif") == CF_E_LIMIT);
    CHECK(e.code == CF_E_LIMIT && e.http_status == 0 && !strcmp(e.msg, "a.tif: too big"));
    return CF_TEST_END();
}
