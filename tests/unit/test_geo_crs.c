/*
 * test_geo_crs.c - GeoKeys to CRSs, and CRS identity, on key directories
 * built here: EPSG codes (and GDAL's replacement of deprecated ones),
 * user-defined projected and geographic CRSs that PROJ must find
 * equivalent to their EPSG twins, unit overrides, ESRI PE strings, local
 * CRSs, vertical codes, malformed directories, citations that try to
 * make PROJ open a path, the memo, and threads.
 * (Against GDAL's own reading of GDAL-written files: tests/python/
 * test_geo.py.)
 */
#include "cf_test.h"
#include "geo/geo.h"

#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct keyset {
    uint16_t dir[4 + 4 * 32];
    size_t nkeys;
    double dbl[32];
    size_t ndbl;
    char ascii[2048];
    size_t nascii;
} keyset;

static void ks_init(keyset *k) {
    memset(k, 0, sizeof *k);
    k->dir[0] = 1;
    k->dir[1] = 1;
    k->dir[2] = 0;
}

static void ks_short(keyset *k, uint16_t id, uint16_t v) {
    uint16_t *e = k->dir + 4 + 4 * k->nkeys++;
    e[0] = id, e[1] = 0, e[2] = 1, e[3] = v;
    k->dir[3] = (uint16_t)k->nkeys;
}

static void ks_double(keyset *k, uint16_t id, double v) {
    uint16_t *e = k->dir + 4 + 4 * k->nkeys++;
    e[0] = id, e[1] = 34736, e[2] = 1, e[3] = (uint16_t)k->ndbl;
    k->dbl[k->ndbl++] = v;
    k->dir[3] = (uint16_t)k->nkeys;
}

static void ks_ascii(keyset *k, uint16_t id, const char *s) {
    size_t n = strlen(s) + 1; /* with GeoTIFF's '|' */
    uint16_t *e = k->dir + 4 + 4 * k->nkeys++;
    e[0] = id, e[1] = 34737, e[2] = (uint16_t)n, e[3] = (uint16_t)k->nascii;
    memcpy(k->ascii + k->nascii, s, n - 1);
    k->ascii[k->nascii + n - 1] = '|';
    k->nascii += n;
    k->dir[3] = (uint16_t)k->nkeys;
}

static cf_crs *build(const keyset *k, char *note) {
    cf__geokeys g = {k->dir, 4 + 4 * k->nkeys, k->dbl, k->ndbl, k->ascii, k->nascii};
    cf_crs *c = NULL;
    char buf[160];
    CHECK(cf__crs_from_geokeys(&g, &c, note ? note : buf, 160) == CF_OK);
    return c;
}

/* A user-defined PCS named only by its citation (GTCitation's PCS
 * citation, key 3073): how the ESRI PE string reaches the reader. */
static cf_crs *build_pcs_citation(const char *text, char *note) {
    keyset k;
    ks_init(&k);
    ks_short(&k, 1024, 1);
    ks_short(&k, 3072, 32767);
    ks_ascii(&k, 3073, text);
    return build(&k, note);
}

static cf_crs *epsg(int code) {
    cf_crs *c = NULL;
    CHECK(cf_crs_from_epsg(code, &c, NULL) == CF_OK);
    return c;
}

static void test_epsg_codes(void) {
    keyset k;
    ks_init(&k);
    ks_short(&k, 1024, 1);
    ks_short(&k, 3072, 32633);
    cf_crs *c = build(&k, NULL);
    CHECK(c && cf_crs_epsg(c) == 32633 && cf_crs_epsg_written(c) == 32633);
    CHECK(cf_crs_kind_of(c) == CF_CRS_PROJECTED && cf_crs_linear_unit(c) == 1.0);
    CHECK(strstr(cf_crs_name(c), "UTM zone 33N") != NULL);
    CHECK(!strcmp(cf_crs_to_string(c), "EPSG:32633"));
    CHECK(strncmp(cf_crs_wkt(c), "PROJCRS[", 8) == 0);
    CHECK(cf_crs_projjson(c)[0] == '{');
    cf_crs *e = epsg(32633);
    CHECK(cf_crs_equivalent(c, e));
    cf_crs_free(e);
    cf_crs_free(c);

    /* Deprecated codes: GDAL's successor, the written code kept. */
    static const int dep[][2] = {{2143, 2948}, {3410, 6933}};
    for (int i = 0; i < 2; i++) {
        ks_init(&k);
        ks_short(&k, 1024, 1);
        ks_short(&k, 3072, (uint16_t)dep[i][0]);
        c = build(&k, NULL);
        CHECK(c && cf_crs_epsg(c) == dep[i][1] && cf_crs_epsg_written(c) == dep[i][0]);
        e = epsg(dep[i][1]);
        CHECK(cf_crs_equivalent(c, e));
        cf_crs_free(e);
        cf_crs_free(c);
    }
    /* The same from a string. */
    CHECK(cf_crs_from_string("EPSG:2143", &c, NULL) == CF_OK);
    CHECK(c && cf_crs_epsg(c) == 2948 && cf_crs_epsg_written(c) == 2143);
    cf_crs_free(c);
    CHECK(cf_crs_from_string("EPSG:900913", &c, NULL) == CF_OK);
    CHECK(c && cf_crs_epsg(c) == 900913);
    cf_crs_free(c);

    /* Geographic, and the model key missing. */
    ks_init(&k);
    ks_short(&k, 2048, 4326);
    c = build(&k, NULL);
    CHECK(c && cf_crs_epsg(c) == 4326 && cf_crs_kind_of(c) == CF_CRS_GEOGRAPHIC);
    CHECK(cf_crs_linear_unit(c) == 0);
    cf_crs *crs84 = NULL;
    CHECK(cf_crs_from_string("OGC:CRS84", &crs84, NULL) == CF_OK);
    CHECK(cf_crs_equivalent(c, crs84)); /* axis order aside, as GeoTIFF */
    cf_crs_free(crs84);
    cf_crs_free(c);
}

static void test_user_defined(void) {
    /* UTM 33N spelled out: GCS, CT_TransverseMercator, parameters. */
    keyset k;
    ks_init(&k);
    ks_short(&k, 1024, 1);
    ks_short(&k, 2048, 4326);
    ks_short(&k, 3072, 32767);
    ks_short(&k, 3074, 32767);
    ks_short(&k, 3075, 1);
    ks_short(&k, 3076, 9001);
    ks_double(&k, 3080, 15);
    ks_double(&k, 3081, 0);
    ks_double(&k, 3082, 500000);
    ks_double(&k, 3083, 0);
    ks_double(&k, 3092, 0.9996);
    ks_ascii(&k, 3073, "my UTM");
    cf_crs *c = build(&k, NULL), *e = epsg(32633);
    CHECK(c && cf_crs_kind_of(c) == CF_CRS_PROJECTED);
    CHECK(c && !strcmp(cf_crs_name(c), "my UTM"));
    CHECK(cf_crs_equivalent(c, e) && cf_crs_equivalent(e, c));
    CHECK(cf_crs_epsg_written(c) == 0);
    cf_crs_free(c);

    /* The same with ProjectionGeoKey = EPSG conversion 16033 and FE in
     * the fallback key (CenterEasting). */
    ks_init(&k);
    ks_short(&k, 1024, 1);
    ks_short(&k, 2048, 4326);
    ks_short(&k, 3072, 32767);
    ks_short(&k, 3074, 16033);
    c = build(&k, NULL);
    CHECK(c && cf_crs_equivalent(c, e));
    cf_crs_free(c);
    cf_crs *e32 = epsg(32632);
    CHECK(!cf_crs_equivalent(e32, e));
    cf_crs_free(e32);

    /* Units overriding the EPSG CRS's: not the same CRS any more. */
    ks_init(&k);
    ks_short(&k, 1024, 1);
    ks_short(&k, 3072, 32633);
    ks_short(&k, 3076, 9002); /* international foot */
    c = build(&k, NULL);
    CHECK(c && fabs(cf_crs_linear_unit(c) - 0.3048) < 1e-12);
    CHECK(!cf_crs_equivalent(c, e));
    CHECK(cf_crs_epsg_written(c) == 32633);
    cf_crs_free(c);

    /* Polar stereographic at 70 N, -45: EPSG:3413 (variant B, polar axes). */
    ks_init(&k);
    ks_short(&k, 1024, 1);
    ks_short(&k, 2048, 4326);
    ks_short(&k, 3072, 32767);
    ks_short(&k, 3075, 15);
    ks_double(&k, 3081, 70);
    ks_double(&k, 3095, -45);
    ks_double(&k, 3092, 1);
    c = build(&k, NULL);
    cf_crs *ps = epsg(3413);
    CHECK(c && cf_crs_equivalent(c, ps));
    cf_crs_free(ps);
    cf_crs_free(c);

    /* Albers on a user-defined ellipsoid (GRS 80 by its axes), US feet. */
    ks_init(&k);
    ks_short(&k, 1024, 1);
    ks_short(&k, 2048, 32767);
    ks_short(&k, 2050, 32767);
    ks_double(&k, 2057, 6378137);
    ks_double(&k, 2059, 298.257222101);
    ks_short(&k, 3072, 32767);
    ks_short(&k, 3075, 11);
    ks_short(&k, 3076, 9003);
    ks_double(&k, 3078, 29.5);
    ks_double(&k, 3079, 45.5);
    ks_double(&k, 3081, 23);
    ks_double(&k, 3080, -96);
    ks_ascii(&k, 2049, "GCS Name = my GRS80|Datum = my datum|Ellipsoid = GRS 1980|Primem = Greenwich|");
    char note[160];
    c = build(&k, note);
    CHECK(c != NULL);
    CHECK(c && cf_crs_kind_of(c) == CF_CRS_PROJECTED && cf_crs_epsg(c) == 0);
    CHECK(c && fabs(cf_crs_linear_unit(c) - 1200.0 / 3937) < 1e-12);
    CHECK(c && strstr(cf_crs_wkt(c), "Albers") != NULL && strstr(cf_crs_wkt(c), "my datum"));
    cf_crs_free(c);
    cf_crs_free(e);
}

static void test_other_forms(void) {
    /* An ESRI PE string in the PCS citation. */
    keyset k;
    ks_init(&k);
    ks_short(&k, 1024, 1);
    ks_short(&k, 3072, 32767);
    ks_ascii(&k, 3073,
             "ESRI PE String = PROJCS[\"WGS_1984_UTM_Zone_33N\",GEOGCS[\"GCS_WGS_1984\","
             "DATUM[\"D_WGS_1984\",SPHEROID[\"WGS_1984\",6378137.0,298.257223563]],"
             "PRIMEM[\"Greenwich\",0.0],UNIT[\"Degree\",0.0174532925199433]],"
             "PROJECTION[\"Transverse_Mercator\"],PARAMETER[\"False_Easting\",500000.0],"
             "PARAMETER[\"False_Northing\",0.0],PARAMETER[\"Central_Meridian\",15.0],"
             "PARAMETER[\"Scale_Factor\",0.9996],PARAMETER[\"Latitude_Of_Origin\",0.0],"
             "UNIT[\"Meter\",1.0]]");
    cf_crs *c = build(&k, NULL), *e = epsg(32633);
    CHECK(c && cf_crs_equivalent(c, e));
    cf_crs_free(c);

    /* A local CRS: keys without a model, only a citation. */
    ks_init(&k);
    ks_ascii(&k, 1026, "site grid");
    ks_short(&k, 3076, 9001);
    c = build(&k, NULL);
    CHECK(c && cf_crs_kind_of(c) == CF_CRS_ENGINEERING && !strcmp(cf_crs_name(c), "site grid"));
    CHECK(!cf_crs_equivalent(c, e));
    cf_crs_free(c);

    /* A vertical EPSG code: compound, horizontally still UTM 33N. */
    ks_init(&k);
    ks_short(&k, 1024, 1);
    ks_short(&k, 3072, 32633);
    ks_short(&k, 4096, 5773); /* EGM96 height */
    c = build(&k, NULL);
    CHECK(c && strstr(cf_crs_wkt(c), "COMPOUNDCRS") != NULL);
    CHECK(c && cf_crs_equivalent(c, e) && cf_crs_kind_of(c) == CF_CRS_PROJECTED);
    cf_crs_free(c);
    cf_crs_free(e);

    /* Strings: WKT, PROJJSON and PROJ strings read back equal. */
    CHECK(cf_crs_from_string("32633", &e, NULL) == CF_OK);
    const char *forms[] = {cf_crs_wkt(e), cf_crs_projjson(e),
                           "+proj=utm +zone=33 +datum=WGS84 +units=m +no_defs"};
    for (int i = 0; i < 3; i++) {
        c = NULL;
        CHECK(cf_crs_from_string(forms[i], &c, NULL) == CF_OK);
        CHECK(c && cf_crs_equivalent(c, e));
        cf_crs_free(c);
    }
    cf_error err = {0};
    CHECK(cf_crs_from_string("EPSG:99999999", &c, &err) == CF_E_ARG && !c);
    CHECK(cf_crs_from_string("not a crs", &c, &err) == CF_E_ARG);
    CHECK(strstr(err.msg, "not a crs") != NULL);
    CHECK(cf_crs_from_string("+proj=pipeline +step +proj=unitconvert", &c, &err) == CF_E_ARG);
    /* The same in WKT: a projection on a BASEGEODCRS with a Cartesian CS. */
    CHECK(cf_crs_from_string(
              "PROJCRS[\"x\",BASEGEODCRS[\"g\",DATUM[\"World Geodetic System 1984\","
              "ELLIPSOID[\"WGS 84\",6378137,298.257223563]],CS[Cartesian,3],"
              "AXIS[\"X\",geocentricX,LENGTHUNIT[\"metre\",1]],"
              "AXIS[\"Y\",geocentricY,LENGTHUNIT[\"metre\",1]],"
              "AXIS[\"Z\",geocentricZ,LENGTHUNIT[\"metre\",1]]],"
              "CONVERSION[\"UTM zone 33N\",METHOD[\"Transverse Mercator\",ID[\"EPSG\",9807]],"
              "PARAMETER[\"Longitude of natural origin\",15,ANGLEUNIT[\"degree\",0.0174532925199433]],"
              "PARAMETER[\"Scale factor at natural origin\",0.9996,SCALEUNIT[\"unity\",1]],"
              "PARAMETER[\"False easting\",500000,LENGTHUNIT[\"metre\",1]]],"
              "CS[Cartesian,2],AXIS[\"E\",east,LENGTHUNIT[\"metre\",1]],"
              "AXIS[\"N\",north,LENGTHUNIT[\"metre\",1]]]",
              &c, &err) == CF_E_ARG && !c);
    CHECK(strstr(err.msg, "not geographic") != NULL);
    cf_crs_free(e);
}

/* A FIFO whose writer end a thread keeps opening (open() blocks until
 * someone opens it to read): each time PROJ opens the path, the thread's
 * open returns, it counts that, writes 'X' into PROJ's read and closes,
 * and waits in open() again, so a second open by PROJ does not hang
 * either.  When the work is done the test opens the FIFO itself to let
 * the thread go.  Opens made for PROJ were all counted by then: PROJ's
 * read ends only when the thread has closed its end. */
typedef struct fifo_probe {
    char path[128];
    pthread_t th;
    atomic_int stop, opened;
} fifo_probe;

static void *fifo_writer(void *arg) {
    fifo_probe *f = arg;
    for (;;) {
        int fd = open(f->path, O_WRONLY);
        if (fd < 0) break;
        int stop = atomic_load(&f->stop);
        if (!stop) atomic_fetch_add(&f->opened, 1);
        if (write(fd, stop ? "S" : "X", 1) != 1) perror("fifo write");
        close(fd);
        if (stop) break;
    }
    return NULL;
}

static int fifo_start(fifo_probe *f, const char *dir, const char *name) {
    snprintf(f->path, sizeof f->path, "%s/%s", dir, name);
    atomic_init(&f->stop, 0);
    atomic_init(&f->opened, 0);
    if (mkfifo(f->path, 0600) != 0) return 0;
    return pthread_create(&f->th, NULL, fifo_writer, f) == 0;
}

/* 1 when nobody but this test opened the FIFO. */
static int fifo_untouched(fifo_probe *f) {
    char c = 0;
    atomic_store(&f->stop, 1);
    int fd = open(f->path, O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, &c, 1) : -1;
    if (fd >= 0) close(fd);
    pthread_join(f->th, NULL);
    unlink(f->path);
    return n == 1 && c == 'S' && atomic_load(&f->opened) == 0;
}

static void test_citations_name_no_path(void) {
    char dir[] = "/tmp/cf_crs_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    /* A planted PROJ init file: +init=FILE:id would read it and make its
     * content the file's CRS. */
    char planted[160], text[1200];
    snprintf(planted, sizeof planted, "%s/planted", dir);
    FILE *pf = fopen(planted, "w");
    CHECK(pf != NULL);
    if (pf) {
        fputs("<x> +proj=longlat +ellps=GRS80 +type=crs <>\n", pf);
        fclose(pf);
    }
    /* Each citation, with the path of a FIFO in it (PATH). */
    static const char *const cits[] = {
        "+init=PATH:x",
        "+proj=longlat +ellps=GRS80 +init=PATH:x +type=crs",
        "+proj=longlat +datum=WGS84 +grids=PATH +type=crs",
        "+proj=longlat +ellps=GRS80 +nadgrids=PATH +type=crs",
        "+proj=longlat +ellps=GRS80 +geoidgrids=PATH +type=crs",
        /* WKT1 with a PROJ.4 extension, used when the CRS is transformed */
        "GEOGCS[\"x\",DATUM[\"WGS_1984\",SPHEROID[\"WGS 84\",6378137,298.257223563]],"
        "PRIMEM[\"Greenwich\",0],UNIT[\"degree\",0.0174532925199433],"
        "EXTENSION[\"PROJ4\",\"+proj=longlat +ellps=WGS84 +nadgrids=PATH\"]]",
        /* WKT2 bound to WGS 84 by a grid file */
        "BOUNDCRS[SOURCECRS[GEOGCRS[\"x\",DATUM[\"d\",ELLIPSOID[\"GRS 1980\",6378137,"
        "298.257222101]],CS[ellipsoidal,2],AXIS[\"lat\",north],AXIS[\"lon\",east],"
        "ANGLEUNIT[\"degree\",0.0174532925199433]]],TARGETCRS[GEOGCRS[\"WGS 84\","
        "DATUM[\"World Geodetic System 1984\",ELLIPSOID[\"WGS 84\",6378137,298.257223563]],"
        "CS[ellipsoidal,2],AXIS[\"lat\",north],AXIS[\"lon\",east],"
        "ANGLEUNIT[\"degree\",0.0174532925199433]]],ABRIDGEDTRANSFORMATION[\"t\","
        "METHOD[\"NTv2\",ID[\"EPSG\",9615]],"
        "PARAMETERFILE[\"Latitude and longitude difference file\",\"PATH\"]]]",
    };
    for (size_t i = 0; i < sizeof cits / sizeof *cits; i++) {
        fifo_probe f;
        char name[16];
        snprintf(name, sizeof name, "fifo%zu", i);
        int ok = fifo_start(&f, dir, name);
        CHECK(ok);
        if (!ok) continue;
        /* PATH -> the FIFO's path */
        const char *at = strstr(cits[i], "PATH");
        snprintf(text, sizeof text, "ESRI PE String = %.*s%s%s", (int)(at - cits[i]),
                 cits[i], f.path, at + 4);
        char note[160] = "";
        cf_crs *c = build_pcs_citation(text, note);
        /* What a read onto WGS 84 would do with it. */
        cf_crs *w = NULL;
        CHECK(cf_crs_from_epsg(4326, &w, NULL) == CF_OK);
        if (c && w) {
            cf__xform *x = NULL;
            cf_error e = {0};
            cf__xform_new(c, w, &x, &e);
            cf__xform_free(x);
        }
        cf_crs_free(w);
        int untouched = fifo_untouched(&f);
        CHECK(untouched);
        CHECK(!c && strstr(note, "refused") != NULL);
        if (!untouched || c) fprintf(stderr, "  citation %zu: %s (%s)\n", i, text, note);
        cf_crs_free(c);
    }
    /* The planted file is not read either: no CRS, a note saying why. */
    snprintf(text, sizeof text, "ESRI PE String = +init=%s:x", planted);
    char note[160] = "";
    cf_crs *c = build_pcs_citation(text, note);
    CHECK(!c && strstr(note, "PROJ string") != NULL);
    cf_crs_free(c);
    unlink(planted);
    rmdir(dir);
}

static void test_bad_keys(void) {
    char note[160];
    keyset k;
    /* No keys: no CRS, no note. */
    ks_init(&k);
    CHECK(build(&k, note) == NULL && note[0] == 0);
    /* More keys announced than stored. */
    ks_init(&k);
    ks_short(&k, 3072, 32633);
    k.dir[3] = 40;
    cf__geokeys g = {k.dir, 8, NULL, 0, NULL, 0};
    cf_crs *c = NULL;
    CHECK(cf__crs_from_geokeys(&g, &c, note, sizeof note) == CF_OK && !c);
    CHECK(strstr(note, "40 keys") != NULL);
    /* An unsupported projection method names itself. */
    ks_init(&k);
    ks_short(&k, 1024, 1);
    ks_short(&k, 2048, 4326);
    ks_short(&k, 3072, 32767);
    ks_short(&k, 3075, 2); /* Alaska modified TM */
    CHECK(build(&k, note) == NULL && strstr(note, "method 2") != NULL);
    /* Geocentric. */
    ks_init(&k);
    ks_short(&k, 1024, 3);
    CHECK(build(&k, note) == NULL && strstr(note, "geocentric") != NULL);
    /* Doubles and ASCII pointing past their arrays are ignored. */
    ks_init(&k);
    ks_short(&k, 1024, 1);
    ks_short(&k, 2048, 4326);
    ks_short(&k, 3072, 32767);
    ks_short(&k, 3075, 1);
    uint16_t *e = k.dir + 4 + 4 * k.nkeys++;
    e[0] = 3082, e[1] = 34736, e[2] = 1, e[3] = 500;
    e = k.dir + 4 + 4 * k.nkeys++;
    e[0] = 3073, e[1] = 34737, e[2] = 9000, e[3] = 0;
    k.dir[3] = (uint16_t)k.nkeys;
    c = build(&k, note);
    CHECK(c != NULL); /* a TM with defaults */
    cf_crs_free(c);
    /* A projection on a geocentric GCS (EPSG:4331, found by fuzz_geokeys):
     * PROJ builds it and then crashed in proj_identify. */
    ks_init(&k);
    ks_short(&k, 1024, 1);
    ks_short(&k, 2048, 4331);
    ks_short(&k, 3072, 32767);
    ks_short(&k, 3075, 1);
    CHECK(build(&k, note) == NULL && strstr(note, "not geographic") != NULL);
    ks_init(&k);
    ks_short(&k, 1024, 1);
    ks_short(&k, 2048, 4978); /* WGS 84 geocentric */
    ks_short(&k, 3072, 32767);
    ks_short(&k, 3074, 16033); /* UTM zone 33N */
    CHECK(build(&k, note) == NULL && strstr(note, "not geographic") != NULL);
}

static void test_memo(void) {
    keyset k;
    ks_init(&k);
    ks_short(&k, 1024, 1);
    ks_short(&k, 3072, 32634);
    cf_crs *a = build(&k, NULL), *b = build(&k, NULL);
    CHECK(a && a == b); /* one CRS per key set */
    cf_crs_free(a);
    cf_crs_free(b);
    cf_crs *r = epsg(32634);
    CHECK(cf_crs_ref(r) == r);
    cf_crs_free(r);
    cf_crs_free(r);
}

/* Many threads building, comparing and printing CRSs at once (run under
 * TSan by run.sh test).  Workers count their own failures: CHECK's
 * counters are the main thread's. */
typedef struct crs_job {
    cf_crs *shared;
    int failures;
} crs_job;

static void *worker(void *arg) {
    crs_job *j = arg;
    for (int i = 0; i < 40; i++) {
        keyset k;
        ks_init(&k);
        ks_short(&k, 1024, 1);
        ks_short(&k, 3072, (uint16_t)(32601 + i % 20));
        cf__geokeys g = {k.dir, 4 + 4 * k.nkeys, NULL, 0, NULL, 0};
        cf_crs *c = NULL;
        char note[160];
        if (cf__crs_from_geokeys(&g, &c, note, sizeof note) != CF_OK || !c) {
            j->failures++;
            continue;
        }
        j->failures += cf_crs_equivalent(c, j->shared) != 0;
        j->failures += cf_crs_wkt(j->shared)[0] != 'P';
        j->failures += cf_crs_projjson(c)[0] != '{';
        j->failures += cf_crs_epsg(c) != 32601 + i % 20;
        cf_crs_free(c);
    }
    return NULL;
}

static void test_threads(void) {
    cf_crs *shared = epsg(32633);
    pthread_t t[6];
    crs_job jobs[6];
    for (int i = 0; i < 6; i++) {
        jobs[i].shared = shared;
        jobs[i].failures = 0;
        pthread_create(&t[i], NULL, worker, &jobs[i]);
    }
    for (int i = 0; i < 6; i++) {
        pthread_join(t[i], NULL);
        CHECK(jobs[i].failures == 0);
    }
    cf_crs_free(shared);
}

int main(void) {
    test_epsg_codes();
    test_user_defined();
    test_other_forms();
    test_bad_keys();
    test_citations_name_no_path();
    test_memo();
    test_threads();
    return CF_TEST_END();
}
