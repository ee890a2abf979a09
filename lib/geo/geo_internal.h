/*
 * geo_internal.h - what the files of lib/geo share and nothing else sees:
 * the PROJ context pool and the cf_crs struct.
 */
#ifndef CF_GEO_INTERNAL_H
#define CF_GEO_INTERNAL_H

#include "geo.h"

#include <proj.h>
#include <pthread.h>
#include <stdatomic.h>

/* A PROJ context for the duration of one piece of work, from a pool
 * shared by the process (contexts are not thread-safe, and opening one
 * opens proj.db: a context per call would cost ~30 ms each time, one per
 * thread would keep a database handle per reader thread).  A context is
 * never used by two threads at once.  After fork() the child starts an
 * empty pool (it never touches a database handle its parent opened).
 * Logging is off: errors are read with cf__proj_msg; network access is
 * off unless cf__proj_network_wanted().  NULL only when out
 * of memory. */
PJ_CONTEXT *cf__proj_get(void);
/* Whether the user asked for PROJ's network access
 * (COGFEED_PROJ_NETWORK=ON / YES / TRUE / 1); a lent context has it on
 * only then, never because of PROJ_NETWORK. */
int cf__proj_network_wanted(void);
void cf__proj_put(PJ_CONTEXT *ctx);
/* The last error PROJ recorded in ctx, as text ("" when none). */
const char *cf__proj_msg(PJ_CONTEXT *ctx);

struct cf_crs {
    atomic_int refs;
    pthread_mutex_t mu;        /* guards pj, horiz and the lazy strings */
    PJ *pj;                    /* the CRS */
    PJ *horiz;                 /* its horizontal part (pj itself unless
                                  compound or bound) */
    int epsg, epsg_written;
    cf_crs_kind kind;
    double linear_unit;
    char *name;
    char *wkt, *projjson, *str; /* made on first use */
};

/* A new cf_crs owning pj (created with ctx).  `written` is the EPSG code
 * as given (0 if none); a deprecated EPSG CRS is swapped for its single
 * successor here.  On failure pj is destroyed. */
cf_status cf__crs_wrap(PJ_CONTEXT *ctx, PJ *pj, int written, cf_crs **out,
                       cf_error *err);

#endif
