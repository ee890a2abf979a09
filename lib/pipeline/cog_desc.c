/*
 * cog_desc.c - what a declared cog (cog_internal.h, "Declared cogs")
 * answers from until its header is read: its description.  Below cog.c,
 * which asks it; cog_declare.c makes declared cogs and loads them.
 */
#include "cog_internal.h"

#include <stdlib.h>

void cf__cog_decl_free(cf_cog *cog) {
    cf__cog_decl *d = cog->decl;
    if (!d) return;
    pthread_mutex_destroy(&d->mu);
    free(d->url);
    free(d);
    cog->decl = NULL;
}

int cf__cog_declared(const cf_cog *cog) {
    return atomic_load_explicit(&((cf_cog *)cog)->state, memory_order_acquire) != CF__COG_OPEN;
}

const cf_grid *cf__cog_decl_grid(const cf_cog *cog) { return &cog->decl->grid; }

uint32_t cf__cog_decl_count(const cf_cog *cog) { return cog->decl->count; }

int cf__cog_has_geotransform(const cf_cog *cog) {
    return cf__cog_declared(cog) || cog->tiff->has_geotransform;
}
