/*
 * json.c - the pull parser of json.h.  Numbers go through strtod_l in the
 * "C" locale (glibc's strtod rounds correctly, as Python's float() does,
 * and a host program's setlocale must not turn "0.5" into 0).
 */
#include "json.h"

#include <errno.h>
#include <locale.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static void c_locale_init(void) { c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0); }

void cf__js_init(cf__json *j, const char *buf, size_t len, int max_depth) {
    j->p = j->start = buf;
    j->end = buf + len;
    j->depth = 0;
    j->max_depth = max_depth;
    j->why = NULL;
    pthread_once(&c_locale_once, c_locale_init);
}

int cf__js_fail(cf__json *j, const char *why) {
    if (!j->why) j->why = why;
    j->p = j->end; /* every later call finds nothing */
    return -1;
}

/* Length of the valid UTF-8 sequence at s (before e): 1-4, 0 if none
 * (no overlong forms, surrogates or code points past U+10FFFF). */
static int utf8_seq(const unsigned char *s, const unsigned char *e) {
    unsigned c = *s;
    if (c < 0x80) return 1;
    int n;
    unsigned min;
    if (c >= 0xC2 && c <= 0xDF) n = 1, min = 0x80;
    else if (c >= 0xE0 && c <= 0xEF) n = 2, min = 0x800;
    else if (c >= 0xF0 && c <= 0xF4) n = 3, min = 0x10000;
    else return 0;
    if (e - s <= n) return 0;
    unsigned cp = c & (0x3F >> n);
    for (int i = 1; i <= n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return n + 1;
}

static void ws(cf__json *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t'))
        j->p++;
}

cf__jkind cf__js_peek(cf__json *j) {
    ws(j);
    if (j->p >= j->end) return CF__J_BAD;
    switch (*j->p) {
    case '{': return CF__J_OBJ;
    case '[': return CF__J_ARR;
    case '"': return CF__J_STR;
    case 't': return CF__J_TRUE;
    case 'f': return CF__J_FALSE;
    case 'n': return CF__J_NULL;
    default: return (*j->p == '-' || (*j->p >= '0' && *j->p <= '9')) ? CF__J_NUM : CF__J_BAD;
    }
}

static int open_container(cf__json *j, char c) {
    if (cf__js_peek(j) == CF__J_BAD || *j->p != c)
        return cf__js_fail(j, c == '{' ? "an object expected" : "an array expected");
    if (++j->depth > j->max_depth) return cf__js_fail(j, "nested too deep");
    j->p++;
    return 0;
}

/* After a member or element: ',' (then `more` must follow) or the
 * closing `close`.  Returns 1 for more, 0 at the close, -1 on a fault.
 * `first`: right after the opening bracket, where the close may come
 * but a ',' may not. */
static int next_in(cf__json *j, char close, int first) {
    ws(j);
    if (j->p >= j->end) return cf__js_fail(j, "document cut short");
    if (*j->p == close) {
        j->p++;
        j->depth--;
        return 0;
    }
    if (!first) {
        if (*j->p != ',') return cf__js_fail(j, "',' or a closing bracket expected");
        j->p++;
        ws(j);
        if (j->p < j->end && *j->p == close) return cf__js_fail(j, "trailing ','");
    }
    return 1;
}

/* Whether the parser sits right after the opening bracket (no member yet). */
static int just_opened(const cf__json *j) {
    const char *q = j->p;
    while (q > j->start && (q[-1] == ' ' || q[-1] == '\n' || q[-1] == '\r' || q[-1] == '\t'))
        q--;
    return q > j->start && (q[-1] == '{' || q[-1] == '[');
}

int cf__js_obj_begin(cf__json *j) { return open_container(j, '{'); }
int cf__js_arr_begin(cf__json *j) { return open_container(j, '['); }

int cf__js_obj_next(cf__json *j, cf__jstr *key) {
    int r = next_in(j, '}', just_opened(j));
    if (r <= 0) return r;
    if (cf__js_str(j, key) < 0) return -1;
    ws(j);
    if (j->p >= j->end || *j->p != ':') return cf__js_fail(j, "':' expected after a key");
    j->p++;
    return 1;
}

int cf__js_arr_next(cf__json *j) { return next_in(j, ']', just_opened(j)); }

int cf__js_str(cf__json *j, cf__jstr *s) {
    if (cf__js_peek(j) != CF__J_STR) return cf__js_fail(j, "a string expected");
    const char *q = ++j->p;
    int esc = 0;
    while (q < j->end) {
        unsigned char c = (unsigned char)*q;
        if (c == '"') break;
        if (c < 0x20) return cf__js_fail(j, "a control character in a string");
        if (c >= 0x80) { /* outside strings such a byte is a syntax error */
            int n = utf8_seq((const unsigned char *)q, (const unsigned char *)j->end);
            if (!n) return cf__js_fail(j, "not UTF-8");
            q += n;
            continue;
        }
        if (c == '\\') {
            esc = 1;
            if (++q >= j->end) break;
            c = (unsigned char)*q;
            if (c == 'u') {
                for (int i = 1; i <= 4; i++)
                    if (q + i >= j->end || !strchr("0123456789abcdefABCDEF", q[i]) || !q[i])
                        return cf__js_fail(j, "a bad \\u escape");
                q += 4;
            } else if (!strchr("\"\\/bfnrt", c) || !c) {
                return cf__js_fail(j, "a bad escape");
            }
        }
        q++;
    }
    if (q >= j->end) return cf__js_fail(j, "a string cut short");
    s->p = j->p;
    s->n = (size_t)(q - j->p);
    s->esc = esc;
    j->p = q + 1;
    return 0;
}

int cf__js_num(cf__json *j, cf__jnum *n) {
    if (cf__js_peek(j) != CF__J_NUM) return cf__js_fail(j, "a number expected");
    const char *q = j->p, *b = q;
    int is_int = 1;
    if (*q == '-') q++;
    if (q < j->end && *q == '0') q++;
    else if (q < j->end && *q >= '1' && *q <= '9')
        while (q < j->end && *q >= '0' && *q <= '9') q++;
    else return cf__js_fail(j, "a bad number");
    if (q < j->end && *q == '.') {
        is_int = 0;
        if (++q >= j->end || *q < '0' || *q > '9') return cf__js_fail(j, "a bad number");
        while (q < j->end && *q >= '0' && *q <= '9') q++;
    }
    if (q < j->end && (*q == 'e' || *q == 'E')) {
        is_int = 0;
        q++;
        if (q < j->end && (*q == '+' || *q == '-')) q++;
        if (q >= j->end || *q < '0' || *q > '9') return cf__js_fail(j, "a bad number");
        while (q < j->end && *q >= '0' && *q <= '9') q++;
    }
    char tmp[400];
    size_t len = (size_t)(q - b);
    if (len >= sizeof tmp) return cf__js_fail(j, "a number of more than 400 digits");
    memcpy(tmp, b, len);
    tmp[len] = 0;
    n->v = strtod_l(tmp, NULL, c_locale);
    n->is_int = is_int;
    n->iv = 0;
    if (is_int) {
        /* Integers beyond int64 are numbers JSON allows but no field here
         * takes: say so rather than round them. */
        if (len > 19 + (b[0] == '-')) return cf__js_fail(j, "an integer beyond 64 bits");
        errno = 0;
        n->iv = strtoll(tmp, NULL, 10);
        if (errno == ERANGE) return cf__js_fail(j, "an integer beyond 64 bits");
    }
    j->p = q;
    return 0;
}

int cf__js_lit(cf__json *j) {
    static const char *const lits[] = {"true", "false", "null"};
    cf__jkind k = cf__js_peek(j);
    if (k != CF__J_TRUE && k != CF__J_FALSE && k != CF__J_NULL)
        return cf__js_fail(j, "true, false or null expected");
    const char *l = lits[k - CF__J_TRUE];
    size_t n = strlen(l);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, l, n) != 0)
        return cf__js_fail(j, "a bad literal");
    j->p += n;
    return 0;
}

int cf__js_skip(cf__json *j) {
    cf__jstr s;
    cf__jnum n;
    switch (cf__js_peek(j)) {
    case CF__J_OBJ: {
        if (cf__js_obj_begin(j) < 0) return -1;
        int r;
        while ((r = cf__js_obj_next(j, &s)) == 1)
            if (cf__js_skip(j) < 0) return -1;
        return r;
    }
    case CF__J_ARR: {
        if (cf__js_arr_begin(j) < 0) return -1;
        int r;
        while ((r = cf__js_arr_next(j)) == 1)
            if (cf__js_skip(j) < 0) return -1;
        return r;
    }
    case CF__J_STR: return cf__js_str(j, &s);
    case CF__J_NUM: return cf__js_num(j, &n);
    case CF__J_BAD: return cf__js_fail(j, "a value expected");
    default: return cf__js_lit(j);
    }
}

static unsigned hex4(const char *p) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v = v * 16 + (unsigned)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    return v;
}

/* One code point of s at *i (escape or raw byte run); -1 for a lone
 * surrogate.  Raw bytes are passed through by the caller. */
static long escaped_cp(const cf__jstr *s, size_t *i) {
    const char *p = s->p + *i; /* at the backslash */
    char c = p[1];
    *i += 2;
    switch (c) {
    case 'b': return '\b';
    case 'f': return '\f';
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case 'u': break;
    default: return c; /* " \ / */
    }
    unsigned u = hex4(p + 2);
    *i += 4;
    if (u >= 0xDC00 && u <= 0xDFFF) return -1;
    if (u >= 0xD800 && u <= 0xDBFF) {
        if (*i + 6 > s->n || s->p[*i] != '\\' || s->p[*i + 1] != 'u') return -1;
        unsigned lo = hex4(s->p + *i + 2);
        if (lo < 0xDC00 || lo > 0xDFFF) return -1;
        *i += 6;
        return 0x10000 + (((long)u - 0xD800) << 10) + ((long)lo - 0xDC00);
    }
    return (long)u;
}

size_t cf__js_decode(const cf__jstr *s, char *out, size_t cap) {
    size_t o = 0, i = 0;
    while (i < s->n) {
        if (s->p[i] != '\\') {
            if (o >= cap) return (size_t)-1;
            out[o++] = s->p[i++];
            continue;
        }
        long cp = escaped_cp(s, &i);
        if (cp <= 0) return (size_t)-1; /* a lone surrogate, or NUL */
        unsigned char b[4];
        size_t k;
        if (cp < 0x80) b[0] = (unsigned char)cp, k = 1;
        else if (cp < 0x800) b[0] = (unsigned char)(0xC0 | (cp >> 6)), b[1] = (unsigned char)(0x80 | (cp & 0x3F)), k = 2;
        else if (cp < 0x10000)
            b[0] = (unsigned char)(0xE0 | (cp >> 12)), b[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F)),
            b[2] = (unsigned char)(0x80 | (cp & 0x3F)), k = 3;
        else
            b[0] = (unsigned char)(0xF0 | (cp >> 18)), b[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F)),
            b[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F)), b[3] = (unsigned char)(0x80 | (cp & 0x3F)), k = 4;
        if (o + k > cap) return (size_t)-1;
        memcpy(out + o, b, k);
        o += k;
    }
    return o;
}

int cf__js_eq(const cf__jstr *s, const char *lit) {
    size_t n = strlen(lit);
    if (!s->esc) return s->n == n && memcmp(s->p, lit, n) == 0;
    char buf[256];
    size_t m = cf__js_decode(s, buf, sizeof buf);
    return m == n && memcmp(buf, lit, n) == 0;
}

size_t cf__js_chars(const cf__jstr *s) {
    size_t c = 0, i = 0;
    while (i < s->n) {
        if (s->p[i] == '\\') {
            if (escaped_cp(s, &i) < 0) i += 0; /* counted as one, as Python's str */
        } else {
            i++;
            while (i < s->n && ((unsigned char)s->p[i] & 0xC0) == 0x80) i++;
        }
        c++;
    }
    return c;
}
