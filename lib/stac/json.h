/*
 * json.h - a pull parser over one JSON document in memory (RFC 8259,
 * strict: no NaN, no comments, UTF-8 without a BOM), for the STAC index:
 * values are visited in document order and never built into a tree, so a
 * 200 MB ItemCollection costs its items' extracted fields, not a DOM.
 *
 * Every call checks what it consumes; the first fault stops the parser
 * (j->why says what and j->p where) and every later call fails at once,
 * so callers test once after a run of calls.  Nesting deeper than
 * max_depth is a fault: recursion is bounded by the caller's limit.
 */
#ifndef CF_STAC_JSON_H
#define CF_STAC_JSON_H

#include <stddef.h>
#include <stdint.h>

typedef enum cf__jkind {
    CF__J_BAD = 0,
    CF__J_OBJ,
    CF__J_ARR,
    CF__J_STR,
    CF__J_NUM,
    CF__J_TRUE,
    CF__J_FALSE,
    CF__J_NULL
} cf__jkind;

typedef struct cf__json {
    const char *p, *end, *start;
    int depth, max_depth;
    const char *why; /* the first fault (static text), NULL while fine */
} cf__json;

/* A string as it lies in the document: its bytes between the quotes;
 * esc when it holds a backslash escape (cf__js_decode gives its text). */
typedef struct cf__jstr {
    const char *p;
    size_t n;
    int esc;
} cf__jstr;

/* A number: its value, and whether it was written as an integer (no
 * fraction or exponent; then iv holds it, when it fits int64). */
typedef struct cf__jnum {
    double v;
    int is_int;
    int64_t iv;
} cf__jnum;

void cf__js_init(cf__json *j, const char *buf, size_t len, int max_depth);
/* Strings are checked to be UTF-8 as they are read (a byte past 0x7F is
 * nowhere else valid), so a document is read once. */
/* The kind of the next value (whitespace skipped), CF__J_BAD at a fault
 * or at the end. */
cf__jkind cf__js_peek(cf__json *j);
/* Objects: begin consumes '{'; next gives the next key (its ':' consumed)
 * and returns 1, or consumes '}' and returns 0; -1 on a fault. */
int cf__js_obj_begin(cf__json *j);
int cf__js_obj_next(cf__json *j, cf__jstr *key);
/* Arrays: begin consumes '['; next returns 1 when an element follows,
 * 0 after consuming ']', -1 on a fault. */
int cf__js_arr_begin(cf__json *j);
int cf__js_arr_next(cf__json *j);
/* Scalars; 0 on success, -1 on a fault (or a value of another kind). */
int cf__js_str(cf__json *j, cf__jstr *s);
int cf__js_num(cf__json *j, cf__jnum *n);
int cf__js_lit(cf__json *j); /* true, false or null */
/* Skip any value, checking it. */
int cf__js_skip(cf__json *j);
/* Set the fault (first one wins) and return -1. */
int cf__js_fail(cf__json *j, const char *why);

/* The text of s into out[cap] (escapes decoded, UTF-8); its length, or
 * (size_t)-1 when it does not fit or holds a lone surrogate or NUL. */
size_t cf__js_decode(const cf__jstr *s, char *out, size_t cap);
/* 1 when s's text equals the NUL-terminated lit. */
int cf__js_eq(const cf__jstr *s, const char *lit);
/* Code points of s's text (escapes counted as one). */
size_t cf__js_chars(const cf__jstr *s);

#endif
