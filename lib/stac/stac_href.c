/*
 * stac_href.c - where a STAC document's asset hrefs may point, by the
 * rules of stac.py's _resolve and _check_target: a remote document may
 * not name local files, an https one not plain http; control characters
 * and schemes cogfeed does not read are refused.
 */
#include "stac.h"

#include <string.h>

/* The scheme's kind: 0 none, 1 file, 2 http, 3 https, 4 s3 / az / gs,
 * -1 another (refused by the reference). */
static int scheme_kind(const char *s, size_t n) {
    size_t k = cf__url_scheme_len_n(s, n);
    if (!k) return 0;
    char t[8];
    if (k >= sizeof t) return -1;
    for (size_t i = 0; i < k; i++) t[i] = (char)(s[i] | 0x20);
    t[k] = 0;
    if (!strcmp(t, "file")) return 1;
    if (!strcmp(t, "http")) return 2;
    if (!strcmp(t, "https")) return 3;
    if (!strcmp(t, "s3") || !strcmp(t, "az") || !strcmp(t, "gs")) return 4;
    return -1;
}

static int has_control(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) return 1;
    return 0;
}

/* stac.py's _resolve + _check_target for an asset href h of an item whose
 * base (document or self link) is `base` (NULL: none): ABS (h as it is)
 * or REL (joined with the base by the reader, which cannot fail: a
 * relative href stays on its base's store); refused otherwise. */
const char *cf__stac_href_rule(const char *h, size_t hn, const char *base, size_t bn, uint8_t *kind) {
    if (has_control(h, hn) || (base && has_control(base, bn))) return "a href with a control character";
    int hs = scheme_kind(h, hn);
    int bs = base ? scheme_kind(base, bn) : 0;
    if (hs < 0) return "a href of an unsupported scheme";
    int t; /* the resolved href's scheme */
    if (hs || !base) {
        if (!hs && h[0] != '/') return "a relative href and no base";
        *kind = CF__HREF_ABS;
        t = hs;
    } else if (h[0] == '/' && (bs == 0 || bs == 1)) {
        *kind = CF__HREF_ABS;
        t = 0;
    } else {
        if (bs < 0) return "a base of an unsupported scheme";
        *kind = CF__HREF_REL;
        t = bs;
    }
    int o = base ? bs : t; /* the origin: base or the href itself */
    if (o >= 2 && t <= 1) return "a local href named by a remote document";
    if (o == 3 && t == 2) return "an http href named by an https document";
    return NULL;
}
