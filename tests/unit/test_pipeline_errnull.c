/*
 * test_pipeline_errnull.c - cogfeed.h: "err may always be NULL".  Without
 * an error struct only the status tells what went wrong, so it must be the
 * failure's own status at every layer (issue 15: the error helpers
 * returned CF_E_ARG for a NULL err, and cf_loader_new reported a missing
 * file as an invalid argument).
 */
#include "cf_test.h"
#include "cogfeed.h"
#include "common/common.h"

#include <string.h>

int main(void) {
    /* The helpers pass the status through, with or without err. */
    CHECK(cf__err_prefix(NULL, CF_E_NOTFOUND, "x") == CF_E_NOTFOUND);
    CHECK(cf__err_hint(NULL, CF_E_CHANGED, "x") == CF_E_CHANGED);
    cf_error e;
    cf__err(&e, CF_E_IO, "read failed");
    CHECK(cf__err_prefix(&e, CF_E_IO, "%s", "a.tif") == CF_E_IO);
    CHECK(!strcmp(e.msg, "a.tif: read failed") && e.code == CF_E_IO);

    const char *missing = "/nonexistent-cogfeed-dir/missing.tif";
    cf_cog *cog = NULL;
    CHECK(cf_cog_open(NULL, missing, &cog, NULL) == CF_E_NOTFOUND && !cog);

    cf_loader_options o;
    cf_loader_options_init(&o);
    const char *imgs[] = {missing};
    o.images = imgs;
    o.nfiles = 1;
    cf_loader *ld = NULL;
    CHECK(cf_loader_new(&o, &ld, NULL) == CF_E_NOTFOUND && !ld);
    /* The same with an error struct: same status, and a message. */
    CHECK(cf_loader_new(&o, &ld, &e) == CF_E_NOTFOUND && !ld);
    CHECK(e.code == CF_E_NOTFOUND && strstr(e.msg, "missing.tif"));
    return CF_TEST_END();
}
