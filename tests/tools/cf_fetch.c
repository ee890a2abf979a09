/*
 * cf_fetch - drive the io layer from tests: open one URL, run a list of
 * operations (header read, batched range reads, fork) and print what
 * happened as one JSON line per process.  The Python fault tests run it
 * against the local nginx / moto / Azurite servers.
 *
 *   cf_fetch [--opt name=value]... [--out FILE] URL OP...
 *   OP: head:LEN | read:OFF+LEN[,OFF+LEN...] | assume:SIZE[:ETAG]
 *       | fork (the rest runs in parent and child; both print)
 *       | inflight:N
 *   --opt names: max_inflight header_bytes merge_gap request_timeout_s
 *       connect_timeout_s low_speed_time_s low_speed_bytes max_retries
 *       retry_budget retry_base_ms retry_max_ms verify_tls ca_file
 *       hedge_after_ms
 * Bytes read are appended to FILE (per process: FILE.child in a child).
 */
#include "io/io.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static int set_opt(cf_io_options *o, const char *kv) {
    const char *eq = strchr(kv, '=');
    if (!eq) return 0;
    size_t k = (size_t)(eq - kv);
    double v = atof(eq + 1);
#define OPT(name, expr)                                                      \
    if (k == strlen(#name) && strncmp(kv, #name, k) == 0) {                  \
        expr;                                                                \
        return 1;                                                            \
    }
    OPT(max_inflight, o->max_inflight = (int)v)
    OPT(header_bytes, o->header_bytes = (size_t)v)
    OPT(merge_gap, o->merge_gap = (size_t)v)
    OPT(request_timeout_s, o->request_timeout_s = v)
    OPT(connect_timeout_s, o->connect_timeout_s = v)
    OPT(low_speed_time_s, o->low_speed_time_s = v)
    OPT(low_speed_bytes, o->low_speed_bytes = (long)v)
    OPT(max_retries, o->max_retries = (int)v)
    OPT(retry_budget, o->retry_budget = (int)v)
    OPT(retry_base_ms, o->retry_base_ms = v)
    OPT(retry_max_ms, o->retry_max_ms = v)
    OPT(verify_tls, o->verify_tls = (int)v)
    OPT(ca_file, o->ca_file = eq + 1)
    OPT(hedge_after_ms, o->hedge_after_ms = v)
#undef OPT
    return 0;
}

static void append_out(const char *path, const uint8_t *p, size_t n) {
    if (!path) return;
    FILE *f = fopen(path, "ab");
    if (!f) return;
    fwrite(p, 1, n, f);
    fclose(f);
}

int main(int argc, char **argv) {
    cf_io_options o;
    cf_io_options_init(&o);
    const char *out = NULL;
    int i = 1;
    for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        if (strcmp(argv[i], "--opt") == 0 && i + 1 < argc) {
            if (!set_opt(&o, argv[++i])) {
                fprintf(stderr, "cf_fetch: unknown option %s\n", argv[i]);
                return 2;
            }
        } else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
            out = argv[++i];
        } else {
            fprintf(stderr, "cf_fetch: unknown flag %s\n", argv[i]);
            return 2;
        }
    }
    if (i >= argc) {
        fprintf(stderr, "usage: cf_fetch [--opt k=v]... [--out FILE] URL OP...\n");
        return 2;
    }
    const char *url = argv[i++];
    cf_error err;
    cf_io *io = NULL;
    if (cf_io_new(&o, &io, &err) != CF_OK) {
        fprintf(stderr, "cf_fetch: %s\n", err.msg);
        return 2;
    }
    cf__src *src = NULL;
    const char *role = "main";
    int child_exit = -1; /* parent: the child's exit status after "fork" */
    char outbuf[4096];
    const char *outp = out;
    /* One JSON line per process: built in memory so that a forked child
     * and its parent never interleave their output. */
    char *jbuf = NULL;
    size_t jlen = 0;
    FILE *j = open_memstream(&jbuf, &jlen);
    if (!j) return 2;
    fprintf(j, "{\"ops\":[");
    int nops = 0;
    cf_status st = cf__src_new(io, url, &src, &err);
    if (st != CF_OK) {
        fprintf(j, "{\"op\":\"new\",\"status\":%d,\"http_status\":%d,\"msg\":",
                (int)st, err.http_status);
        json_str(j, err.msg);
        fprintf(j, "}");
        nops++;
    }
    for (; src && i < argc; i++) {
        const char *op = argv[i];
        if (nops++) fprintf(j, ",");
        cf__err_clear(&err);
        double t0 = cf__now();
        if (strncmp(op, "head:", 5) == 0) {
            size_t len = (size_t)strtoull(op + 5, NULL, 10);
            uint8_t *buf = malloc(len ? len : 1);
            size_t got = 0;
            st = cf__src_read_head(src, buf, len, &got, &err);
            if (st == CF_OK) append_out(outp, buf, got);
            free(buf);
            fprintf(j, "{\"op\":\"head\",\"got\":%zu,", got);
        } else if (strncmp(op, "read:", 5) == 0) {
            size_t n = 1;
            for (const char *c = op + 5; *c; c++) n += *c == ',';
            cf__range_req *r = calloc(n, sizeof *r);
            const char *c = op + 5;
            size_t total = 0;
            for (size_t k = 0; k < n; k++) {
                char *e;
                r[k].off = strtoull(c, &e, 10);
                r[k].len = strtoull(e + 1, &e, 10);
                r[k].dst = malloc(r[k].len ? r[k].len : 1);
                total += r[k].len;
                c = *e ? e + 1 : e;
            }
            st = cf__src_read(src, r, n, &err);
            fprintf(j, "{\"op\":\"read\",\"n\":%zu,\"bytes\":%zu,\"req_status\":[",
                    n, total);
            for (size_t k = 0; k < n; k++) {
                fprintf(j, "%s%d", k ? "," : "", (int)r[k].status);
                if (st == CF_OK) append_out(outp, r[k].dst, r[k].len);
                free(r[k].dst);
            }
            fprintf(j, "],");
            free(r);
        } else if (strncmp(op, "assume:", 7) == 0) {
            char *e;
            uint64_t size = strtoull(op + 7, &e, 10);
            cf__src_assume(src, size, *e == ':' ? e + 1 : NULL);
            st = CF_OK;
            fprintf(j, "{\"op\":\"assume\",");
        } else if (strncmp(op, "inflight:", 9) == 0) {
            cf_io_set_max_inflight(io, atoi(op + 9));
            st = CF_OK;
            fprintf(j, "{\"op\":\"inflight\",");
        } else if (strcmp(op, "fork") == 0) {
            fflush(stdout);
            pid_t pid = fork();
            if (pid == 0) {
                role = "child";
                if (out) {
                    snprintf(outbuf, sizeof outbuf, "%s.child", out);
                    outp = outbuf;
                }
            } else {
                int ws = 0;
                waitpid(pid, &ws, 0);
                child_exit = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128;
                role = "parent";
            }
            st = CF_OK;
            fprintf(j, "{\"op\":\"fork\",");
        } else {
            fprintf(stderr, "cf_fetch: unknown op %s\n", op);
            return 2;
        }
        fprintf(j, "\"status\":%d,\"http_status\":%d,\"secs\":%.3f,\"msg\":",
                (int)st, err.http_status, cf__now() - t0);
        json_str(j, st == CF_OK ? "" : err.msg);
        fprintf(j, "}");
    }
    cf_io_stats s;
    cf_io_get_stats(io, &s);
    fprintf(j, "],\"role\":\"%s\",\"child_exit\":%d,", role, child_exit);
    if (src) {
        uint64_t size = cf__src_size(src);
        fprintf(j, "\"size\":%" PRId64 ",\"etag\":",
                size == UINT64_MAX ? (int64_t)-1 : (int64_t)size);
        json_str(j, cf__src_etag(src) ? cf__src_etag(src) : "");
        fprintf(j, ",\"name\":");
        json_str(j, cf__src_name(src));
        fprintf(j, ",\"requests\":%" PRIu64 ",", cf__src_requests(src));
    }
    fprintf(j,
            "\"stats\":{\"requests\":%" PRIu64 ",\"retries\":%" PRIu64
            ",\"bytes_fetched\":%" PRIu64 ",\"connect_failures\":%" PRIu64
            ",\"read_failures\":%" PRIu64 ",\"inflight\":%d,\"max_inflight\":%d"
            ",\"hedges\":%" PRIu64 ",\"hedge_wins\":%" PRIu64 "}}\n",
            s.requests, s.retries, s.bytes_fetched, s.connect_failures,
            s.read_failures, s.inflight, s.max_inflight, s.hedges, s.hedge_wins);
    fclose(j);
    fputs(jbuf, stdout);
    free(jbuf);
    fflush(stdout);
    cf__src_free(src);
    cf_io_free(io);
    return 0;
}
