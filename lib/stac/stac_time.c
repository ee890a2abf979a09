/*
 * stac_time.c - STAC's date-times (RFC 3339) as stac.py's _time reads
 * them, in UTC microseconds, for the index's search and sort.
 */
#include "stac.h"

#include <string.h>

static int digits(const char *p, int n, int *v) {
    *v = 0;
    for (int i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return 0;
        *v = *v * 10 + (p[i] - '0');
    }
    return 1;
}

static int64_t days_from_civil(int64_t y, int m, int d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

int cf__stac_rfc3339(const char *p, size_t len, int64_t *us) {
    if (len < 20 || len > 64) return 0;
    int y, mo, d, h, mi, se;
    if (!digits(p, 4, &y) || p[4] != '-' || !digits(p + 5, 2, &mo) || p[7] != '-' ||
        !digits(p + 8, 2, &d) || !strchr("Tt ", p[10]) || !p[10] || !digits(p + 11, 2, &h) ||
        p[13] != ':' || !digits(p + 14, 2, &mi) || p[16] != ':' || !digits(p + 17, 2, &se))
        return 0;
    size_t i = 19;
    int64_t frac = 0;
    if (p[i] == '.') {
        size_t k = 0;
        for (i++; i < len && p[i] >= '0' && p[i] <= '9'; i++, k++)
            if (k < 6) frac = frac * 10 + (p[i] - '0');
        if (k == 0 || k > 12) return 0;
        for (; k < 6; k++) frac *= 10;
    }
    if (i >= len) return 0;
    int64_t off = 0;
    if ((p[i] == 'Z' || p[i] == 'z') && i + 1 == len) {
        off = 0;
    } else if ((p[i] == '+' || p[i] == '-') && i + 6 == len && p[i + 3] == ':') {
        int oh, om;
        if (!digits(p + i + 1, 2, &oh) || !digits(p + i + 4, 2, &om)) return 0;
        off = oh * 60 + om;
        if (off >= 24 * 60) return 0; /* datetime.timezone's bound */
        if (p[i] == '-') off = -off;
    } else {
        return 0;
    }
    static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (y < 1 || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] + (mo == 2 && leap) || h > 23 || mi > 59)
        return 0;
    if (se > 59) se = 59; /* _time's min(se, 59): a leap second */
    int64_t t = ((days_from_civil(y, mo, d) * 24 + h) * 60 + mi - off) * 60 + se;
    *us = t * 1000000 + frac;
    return 1;
}
