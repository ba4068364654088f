/* Memory attacks by an unprivileged tenant against the real npud (issue 9, items 3, 5, 7
 * and 8): reading another tenant's freed memory, device memory kept resident after free,
 * quota escape through views and imports, re-export of an import, and tokens that outlive
 * a revoke or the buffer they name. The attacker runs as the system user npud-attacker
 * (tenant "att", 64 MiB quota); root's sessions are the victims (tenant "owner", or "third"
 * when root plays a third party). Every test checks that the daemon is alive and that
 * another client still works. */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "npu.h"
#include "harness.h"

#define MIB (1ull << 20)
#define QUOTA (64 * MIB)

#define OK(expr) ck_assert_msg((expr) == NPU_OK, "%s: %s", #expr, npu_error_message())

static struct npud_proc proc;
static char conf[128];
static uid_t att_uid;
static gid_t att_gid;

/* Shared with the attacker's child process: tokens in, findings out. */
struct share {
        char token[NPU_TOKEN_LEN];
        char token2[NPU_TOKEN_LEN];
        char reexport[NPU_TOKEN_LEN]; /* a token the attacker managed to make, "" if none */
        uint64_t size;
        int scenario;
};
static struct share *sh;

static void start(void)
{
        char text[512];
        FILE *f;

        if (harness_attacker(&att_uid, &att_gid) < 0) {
                fprintf(stderr, "test_hostile_mem: no unprivileged user; run as root\n");
                ck_abort_msg("the attacker user npud-attacker cannot be created");
        }
        snprintf(text, sizeof(text),
                 "{\"tenants\": [{\"name\": \"owner\", \"gids\": [0]},"
                 " {\"name\": \"att\", \"uids\": [%d], \"memory_quota\": {\"total\": %llu}},"
                 " {\"name\": \"third\", \"uids\": [0]}]}",
                 (int)att_uid, (unsigned long long)QUOTA);
        snprintf(conf, sizeof(conf), "/tmp/npud-hostile-mem-%d.conf", (int)getpid());
        f = fopen(conf, "w");
        ck_assert_ptr_nonnull(f);
        fputs(text, f);
        fclose(f);
        const char *extra[] = { "--config", conf, NULL };
        ck_assert_int_eq(harness_start(&proc, extra), 0);
        ck_assert_int_eq(harness_share_socket(&proc), 0);
        sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        ck_assert_ptr_ne(sh, MAP_FAILED);
        memset(sh, 0, sizeof(*sh));
}

static void stop(void)
{
        unlink(conf);
        munmap(sh, sizeof(*sh));
        ck_assert_int_eq(harness_stop(&proc), 0);
}

static npu_context_t *join(const char *tenant)
{
        npu_connect_options_t o = { .size = sizeof(o), .socket = proc.sock, .tenant = tenant };
        npu_context_t *c;
        OK(npu_connect_with(&o, &c));
        return c;
}

static uint64_t dev_used(npu_context_t *c, int dev)
{
        npu_device_info_t info = { .size = sizeof(info) };
        OK(npu_device_get_info(c, dev, &info));
        return info.memory_used;
}

/* The tenants method's memory_used of one tenant (any session may ask); UINT64_MAX when it
 * cannot be read. */
static uint64_t tenant_used(const char *name)
{
        uint64_t v = UINT64_MAX;
        int fd = harness_raw_connect(proc.sock);
        json_t *r, *t;
        size_t i;

        if (fd < 0)
                return v;
        if (harness_raw_hello(fd) == 0 &&
            (r = harness_raw_call(fd, 2, "{\"method\":\"tenants\",\"params\":{}}"))) {
                json_array_foreach(json_object_get(json_object_get(r, "result"), "tenants"), i, t)
                        if (strcmp(json_string_value(json_object_get(t, "name")), name) == 0)
                                v = (uint64_t)json_integer_value(json_object_get(t, "memory_used"));
                json_decref(r);
        }
        close(fd);
        return v;
}

/* The daemon is alive and a well-behaved client can round-trip data. */
static void other_client_works(void)
{
        static unsigned round;
        uint8_t out[4096], in[4096];
        npu_context_t *c;
        npu_buffer_t b;

        round++;
        ck_assert_msg(harness_alive(&proc), "npud is not running");
        c = join(NULL);
        OK(npu_ping(c));
        for (size_t i = 0; i < sizeof(out); i++)
                out[i] = (uint8_t)(i * 7 + round * 13 + 1);
        memset(in, 0, sizeof(in));
        OK(npu_malloc(c, 0, sizeof(out), &b));
        OK(npu_memcpy_to_device(c, b, 0, out, sizeof(out)));
        OK(npu_memcpy_from_device(c, in, b, 0, sizeof(in)));
        ck_assert_mem_eq(in, out, sizeof(out));
        OK(npu_free(c, b));
        npu_disconnect(c);
        ck_assert(harness_alive(&proc));
}

/* Checks in the attacker's process: print why and fail. */
#define ATT_CHECK(cond, ...)                                                  \
        do {                                                                  \
                if (!(cond)) {                                                \
                        fprintf(stderr, "attacker (line %d): ", __LINE__);    \
                        fprintf(stderr, __VA_ARGS__);                         \
                        fprintf(stderr, " [%s]\n", npu_error_message());      \
                        return 1;                                             \
                }                                                             \
        } while (0)

static npu_context_t *att_join(void)
{
        npu_connect_options_t o = { .size = sizeof(o), .socket = proc.sock };
        npu_context_t *c = NULL;

        if (npu_connect_with(&o, &c) != NPU_OK) {
                fprintf(stderr, "attacker: cannot connect: %s\n", npu_error_message());
                return NULL;
        }
        if (strcmp(npu_tenant(c), "att") != 0) {
                fprintf(stderr, "attacker: landed in tenant '%s', not 'att'\n", npu_tenant(c));
                npu_disconnect(c);
                return NULL;
        }
        return c;
}

static void fill_secret(uint8_t *p, uint64_t n, unsigned salt)
{
        for (uint64_t i = 0; i < n; i++)
                p[i] = (uint8_t)(0xa5 ^ (i * 131 + salt)) | 1; /* never 0 */
}

/* ---- item 3: freed memory reaches the next tenant cleared ---- */

/* Allocate sh->size bytes on device 0 and check every byte reads zero. */
static int att_read_fresh(void *arg)
{
        npu_context_t *c = att_join();
        npu_buffer_t b;
        uint64_t n = sh->size, nonzero = 0, first = UINT64_MAX;
        uint8_t *p = malloc(n);

        (void)arg;
        ATT_CHECK(c && p, "setup");
        memset(p, 0xee, n);
        ATT_CHECK(npu_malloc(c, 0, n, &b) == NPU_OK, "malloc %" PRIu64, n);
        ATT_CHECK(npu_memcpy_from_device(c, p, b, 0, n) == NPU_OK, "read back");
        for (uint64_t i = 0; i < n; i++)
                if (p[i]) {
                        nonzero++;
                        if (first == UINT64_MAX)
                                first = i;
                }
        ATT_CHECK(nonzero == 0, "scenario %d: %" PRIu64 " of %" PRIu64
                  " bytes of a fresh allocation are not zero (first at %" PRIu64 ")",
                  sh->scenario, nonzero, n, first);
        ATT_CHECK(npu_free(c, b) == NPU_OK, "free");
        npu_disconnect(c);
        free(p);
        return 0;
}

static void victim_write(npu_context_t *c, npu_buffer_t b, uint64_t n, unsigned salt)
{
        uint8_t *p = malloc(n), *q = malloc(n);

        ck_assert(p && q);
        fill_secret(p, n, salt);
        OK(npu_memcpy_to_device(c, b, 0, p, n));
        OK(npu_memcpy_from_device(c, q, b, 0, n));
        ck_assert_mem_eq(p, q, n);
        free(p);
        free(q);
}

static void attacker_reads_zeros(int scenario, uint64_t size)
{
        sh->scenario = scenario;
        sh->size = size;
        ck_assert_msg(harness_run_as(att_uid, att_gid, att_read_fresh, NULL) == 0,
                      "scenario %d: the attacker read another tenant's freed data", scenario);
}

START_TEST(test_freed_memory_is_cleared)
{
        npu_context_t *v, *v2;
        npu_buffer_t b, lo, mid, hi;
        npu_stream_t st;

        start();
        v = join(NULL);
        ck_assert_str_eq(npu_tenant(v), "owner");

        /* 1: 1 MiB secret, npu_free */
        OK(npu_malloc(v, 0, MIB, &b));
        victim_write(v, b, MIB, 1);
        OK(npu_free(v, b));
        attacker_reads_zeros(1, MIB);

        /* 2: a block between live neighbours, not page aligned */
        OK(npu_malloc(v, 0, 1000, &lo));
        OK(npu_malloc(v, 0, 5000, &mid));
        OK(npu_malloc(v, 0, 1000, &hi));
        victim_write(v, lo, 1000, 2);
        victim_write(v, mid, 5000, 3);
        victim_write(v, hi, 1000, 4);
        OK(npu_free(v, mid));
        attacker_reads_zeros(2, 5000);
        OK(npu_free(v, lo));
        OK(npu_free(v, hi));
        attacker_reads_zeros(3, 1000);

        /* 3: stream-ordered free */
        OK(npu_stream_create(v, 0, 0, &st));
        OK(npu_malloc(v, 0, 3 * MIB + 123, &b));
        victim_write(v, b, 3 * MIB + 123, 5);
        OK(npu_free_async(v, st, b, NULL));
        OK(npu_stream_synchronize(v, st));
        attacker_reads_zeros(4, 3 * MIB + 123);

        /* 4: the victim's session ends holding the secret */
        v2 = join(NULL);
        uint64_t base = dev_used(v, 0);
        OK(npu_malloc(v2, 0, 2 * MIB, &b));
        victim_write(v2, b, 2 * MIB, 6);
        npu_disconnect(v2);
        for (int i = 0; i < 500 && dev_used(v, 0) != base; i++)
                usleep(2000);
        ck_assert_uint_eq(dev_used(v, 0), base);
        attacker_reads_zeros(5, 2 * MIB);

        npu_disconnect(v);
        other_client_works();
        stop();
}
END_TEST

/* ---- item 5: device memory goes back to the host on free ---- */

START_TEST(test_rss_returns_after_free)
{
        const uint64_t size = 256 * MIB;
        npu_context_t *c;
        npu_buffer_t b;

        start();
        c = join(NULL);
        for (int round = 0; round < 2; round++) {
                uint64_t before = (uint64_t)harness_proc_kib(proc.pid, "VmRSS");
                OK(npu_malloc(c, round, size, &b));
                OK(npu_memset(c, b, 0, 0x5a, size));
                uint64_t touched = (uint64_t)harness_proc_kib(proc.pid, "VmRSS");
                OK(npu_free(c, b));
                /* npud's reclaimer thread gives the pages back just after the free
                 * (daemon/exec/reclaim.h): within milliseconds, 2 s at most here */
                uint64_t after = (uint64_t)harness_proc_kib(proc.pid, "VmRSS");
                for (int i = 0; i < 200 && after + size / 1024 * 3 / 4 > touched; i++) {
                        usleep(10000);
                        after = (uint64_t)harness_proc_kib(proc.pid, "VmRSS");
                }
                printf("npud VmRSS on device %d: %" PRIu64 " KiB before, %" PRIu64
                       " KiB with 256 MiB touched, %" PRIu64 " KiB after free\n",
                       round, before, touched, after);
                ck_assert_uint_ge(touched, before + size / 1024 * 3 / 4);
                ck_assert_msg(after + size / 1024 * 3 / 4 <= touched,
                              "RSS stays at %" PRIu64 " KiB after freeing 256 MiB (%" PRIu64
                              " KiB touched)", after, touched);
        }
        npu_disconnect(c);
        other_client_works();
        stop();
}
END_TEST

/* ---- item 7: views and imports keep the allocation charged ---- */

static int att_view_escape(void *arg)
{
        npu_context_t *c = att_join();
        npu_buffer_t b, v, x;
        uint64_t t;
        int e;

        (void)arg;
        ATT_CHECK(c, "setup");
        ATT_CHECK(npu_malloc(c, 0, QUOTA, &b) == NPU_OK, "malloc of the whole quota");
        ATT_CHECK(npu_buffer_view(c, b, 0, QUOTA, &v) == NPU_OK, "view");
        ATT_CHECK(npu_free(c, b) == NPU_OK, "free the original");
        ATT_CHECK((t = tenant_used("att")) == QUOTA, "tenant memory_used %" PRIu64 " while a view holds %llu",
                  t, (unsigned long long)QUOTA);
        e = npu_malloc(c, 0, QUOTA, &x);
        ATT_CHECK(e == NPU_ERR_QUOTA, "second 64 MiB with a view of the first held: %d, not quota", e);
        e = npu_malloc(c, 1, MIB, &x);
        ATT_CHECK(e == NPU_ERR_QUOTA, "1 MiB on device 1 past the quota: %d", e);
        /* a view of a view, the parent view freed: still charged */
        ATT_CHECK(npu_buffer_view(c, v, MIB, MIB, &x) == NPU_OK, "view of view");
        ATT_CHECK(npu_free(c, v) == NPU_OK, "free view");
        ATT_CHECK(tenant_used("att") == QUOTA, "view of view uncharged");
        e = npu_malloc(c, 0, MIB, &v);
        ATT_CHECK(e == NPU_ERR_QUOTA, "alloc with a view of a view held: %d", e);
        ATT_CHECK(npu_free(c, x) == NPU_OK, "free last view");
        ATT_CHECK((t = tenant_used("att")) == 0, "tenant memory_used %" PRIu64 " after the last view", t);
        ATT_CHECK(npu_malloc(c, 0, QUOTA, &b) == NPU_OK, "the quota is free again");
        /* end the session holding a view whose original was freed: the charge goes with it */
        ATT_CHECK(npu_buffer_view(c, b, 0, 4096, &v) == NPU_OK, "view");
        ATT_CHECK(npu_free(c, b) == NPU_OK, "free");
        npu_disconnect(c);
        return 0;
}

START_TEST(test_view_keeps_quota_charged)
{
        start();
        ck_assert_int_eq(harness_run_as(att_uid, att_gid, att_view_escape, NULL), 0);
        for (int i = 0; i < 500 && tenant_used("att") != 0; i++)
                usleep(2000);
        ck_assert_uint_eq(tenant_used("att"), 0); /* uncharged once, not below zero */
        other_client_works();
        stop();
}
END_TEST

static int att_import_escape(void *arg)
{
        npu_context_t *a = att_join(), *b = att_join();
        npu_buffer_t src, imp, x;
        char token[NPU_TOKEN_LEN];
        uint64_t t;
        int e;

        (void)arg;
        ATT_CHECK(a && b, "setup");
        ATT_CHECK(npu_malloc(a, 0, QUOTA, &src) == NPU_OK, "malloc");
        ATT_CHECK(npu_buffer_export(a, src, NULL, 0, 0, token) == NPU_OK, "export");
        ATT_CHECK(npu_buffer_import(b, token, 0, &imp) == NPU_OK, "import");
        ATT_CHECK(npu_free(a, src) == NPU_OK, "free the original");
        e = npu_malloc(a, 0, QUOTA, &x);
        ATT_CHECK(e == NPU_ERR_QUOTA, "export, free, import, alloc again: %d, not quota", e);
        /* the exporter's session ends: the importer still holds the memory, still charged */
        npu_disconnect(a);
        ATT_CHECK((t = tenant_used("att")) == QUOTA, "memory_used %" PRIu64 " after the exporter left", t);
        e = npu_malloc(b, 0, MIB, &x);
        ATT_CHECK(e == NPU_ERR_QUOTA, "alloc past the quota after the exporter left: %d", e);
        ATT_CHECK(npu_free(b, imp) == NPU_OK, "free import");
        ATT_CHECK((t = tenant_used("att")) == 0, "memory_used %" PRIu64 " after the last import", t);
        ATT_CHECK(npu_malloc(b, 0, QUOTA, &x) == NPU_OK, "the quota is free again");
        npu_disconnect(b);
        return 0;
}

START_TEST(test_export_free_import_charged)
{
        npu_context_t *c;
        uint64_t base;

        start();
        c = join(NULL);
        base = dev_used(c, 0);
        ck_assert_int_eq(harness_run_as(att_uid, att_gid, att_import_escape, NULL), 0);
        for (int i = 0; i < 500 && (tenant_used("att") != 0 || dev_used(c, 0) != base); i++)
                usleep(2000);
        ck_assert_uint_eq(tenant_used("att"), 0);
        ck_assert_uint_eq(dev_used(c, 0), base);
        npu_disconnect(c);
        other_client_works();
        stop();
}
END_TEST

/* ---- item 8: sharing scope ---- */

/* Import root's read-only export and try to pass it on: as it is, through a view, as a
 * writable view. Any token that comes out is left in sh->reexport. */
static int att_reexport(void *arg)
{
        npu_context_t *c = att_join();
        const char *third[] = { "third" };
        npu_buffer_t imp, v;
        char tok[NPU_TOKEN_LEN];
        uint8_t out[64];
        int e;

        (void)arg;
        ATT_CHECK(c, "setup");
        ATT_CHECK(npu_buffer_import(c, sh->token, 0, &imp) == NPU_OK, "import");
        ATT_CHECK(npu_memcpy_from_device(c, out, imp, 0, sizeof(out)) == NPU_OK && out[0] == 0x42,
                  "read the import");
        e = npu_buffer_export(c, imp, third, 1, 0, tok);
        if (e == NPU_OK)
                memcpy(sh->reexport, tok, NPU_TOKEN_LEN);
        ATT_CHECK(e == NPU_ERR_PERMISSION, "re-export of an import: %d, not permission", e);
        ATT_CHECK(strstr(npu_error_message(), "import") != NULL, "unclear message");
        ATT_CHECK(npu_buffer_view(c, imp, 0, 4096, &v) == NPU_OK, "view of the import");
        e = npu_buffer_export(c, v, third, 1, 0, tok);
        if (e == NPU_OK)
                memcpy(sh->reexport, tok, NPU_TOKEN_LEN);
        ATT_CHECK(e == NPU_ERR_PERMISSION, "export of a view of an import: %d", e);
        e = npu_buffer_export(c, v, NULL, 0, 0, tok);
        ATT_CHECK(e == NPU_ERR_PERMISSION, "export of a view of an import to its own tenant: %d", e);
        /* still readable: the import itself is fine */
        ATT_CHECK(npu_memcpy_from_device(c, out, v, 0, sizeof(out)) == NPU_OK, "read the view");
        npu_disconnect(c);
        return 0;
}

START_TEST(test_reexport_refused)
{
        const char *att[] = { "att" };
        npu_context_t *owner, *third;
        npu_buffer_t b, x;

        start();
        owner = join(NULL);
        third = join("third");
        ck_assert_str_eq(npu_tenant(third), "third");
        OK(npu_malloc(owner, 0, MIB, &b));
        OK(npu_memset(owner, b, 0, 0x42, MIB));
        OK(npu_buffer_export(owner, b, att, 1, 1, sh->token));
        ck_assert_int_eq(npu_buffer_import(third, sh->token, 0, &x), NPU_ERR_PERMISSION);
        ck_assert_int_eq(harness_run_as(att_uid, att_gid, att_reexport, NULL), 0);
        ck_assert_msg(sh->reexport[0] == 0, "the importer made a token");
        npu_disconnect(third);
        npu_disconnect(owner);
        other_client_works();
        stop();
}
END_TEST

/* Import sh->token (must work), try to re-export it to 'third'. */
static int att_import_then_reexport(void *arg)
{
        npu_context_t *c = att_join();
        const char *third[] = { "third" };
        npu_buffer_t imp;
        char tok[NPU_TOKEN_LEN];

        (void)arg;
        ATT_CHECK(c, "setup");
        ATT_CHECK(npu_buffer_import(c, sh->token, 0, &imp) == NPU_OK, "import");
        if (npu_buffer_export(c, imp, third, 1, 0, tok) == NPU_OK)
                memcpy(sh->reexport, tok, NPU_TOKEN_LEN);
        /* keep the import alive while root revokes: the process waits for the signal */
        sh->scenario = 1;
        for (int i = 0; i < 5000 && sh->scenario == 1; i++)
                usleep(1000);
        npu_disconnect(c);
        return 0;
}

/* Import sh->token: must fail with bad-handle. */
static int att_import_fails(void *arg)
{
        npu_context_t *c = att_join();
        npu_buffer_t x;
        int e;

        (void)arg;
        ATT_CHECK(c, "setup");
        e = npu_buffer_import(c, sh->token, 0, &x);
        ATT_CHECK(e == NPU_ERR_BAD_HANDLE, "scenario %d: an ended token still imports (%d)", sh->scenario, e);
        e = sh->token2[0] ? npu_buffer_import(c, sh->token2, 0, &x) : NPU_ERR_BAD_HANDLE;
        ATT_CHECK(e == NPU_ERR_BAD_HANDLE, "scenario %d: the second token still imports (%d)", sh->scenario, e);
        npu_disconnect(c);
        return 0;
}

START_TEST(test_revoke_ends_derived_tokens)
{
        const char *att[] = { "att" };
        npu_context_t *owner, *third;
        npu_buffer_t b, x;
        pid_t child;

        start();
        owner = join(NULL);
        third = join("third");
        OK(npu_malloc(owner, 0, MIB, &b));
        OK(npu_buffer_export(owner, b, att, 1, 1, sh->token));
        /* the attacker imports and tries to hand the memory to a third tenant, keeping the
         * import while the owner revokes */
        child = fork();
        ck_assert_int_ge(child, 0);
        if (child == 0)
                _exit(harness_run_as(att_uid, att_gid, att_import_then_reexport, NULL));
        for (int i = 0; i < 5000 && sh->scenario != 1; i++)
                usleep(1000);
        ck_assert_int_eq(sh->scenario, 1);
        OK(npu_buffer_revoke(owner, sh->token));
        /* nothing derived from the revoked token imports any more, for anyone */
        if (sh->reexport[0]) {
                char tok[NPU_TOKEN_LEN + 1] = "";
                memcpy(tok, sh->reexport, NPU_TOKEN_LEN);
                ck_assert_msg(npu_buffer_import(third, tok, 0, &x) == NPU_ERR_BAD_HANDLE,
                              "a token the importer made outlives the owner's revoke");
        }
        ck_assert_int_eq(npu_buffer_import(owner, sh->token, 0, &x), NPU_ERR_BAD_HANDLE);
        sh->scenario = 2;
        int status = -1;
        ck_assert_int_eq(waitpid(child, &status, 0), child);
        ck_assert_int_eq(status, 0);
        sh->scenario = 3;
        ck_assert_int_eq(harness_run_as(att_uid, att_gid, att_import_fails, NULL), 0);
        ck_assert_msg(sh->reexport[0] == 0, "the importer could re-export");
        OK(npu_free(owner, b));
        npu_disconnect(third);
        npu_disconnect(owner);
        other_client_works();
        stop();
}
END_TEST

START_TEST(test_freed_buffer_token_ends)
{
        const char *att[] = { "att" };
        npu_context_t *owner;
        npu_buffer_t b, v;
        npu_stream_t st;

        start();
        owner = join(NULL);

        /* npu_free of the exported buffer, the exporter still connected */
        OK(npu_malloc(owner, 0, MIB, &b));
        OK(npu_buffer_export(owner, b, att, 1, 0, sh->token));
        OK(npu_free(owner, b));
        sh->scenario = 1;
        ck_assert_int_eq(harness_run_as(att_uid, att_gid, att_import_fails, NULL), 0);

        /* stream-ordered free: the token ends when the FREE record is submitted */
        OK(npu_stream_create(owner, 0, 0, &st));
        OK(npu_malloc(owner, 0, MIB, &b));
        OK(npu_buffer_export(owner, b, att, 1, 0, sh->token));
        OK(npu_free_async(owner, st, b, NULL));
        OK(npu_flush(owner));
        OK(npu_stream_synchronize(owner, st));
        sh->scenario = 2;
        ck_assert_int_eq(harness_run_as(att_uid, att_gid, att_import_fails, NULL), 0);

        /* freeing a buffer ends the tokens of views made from it */
        OK(npu_malloc(owner, 0, MIB, &b));
        OK(npu_buffer_view(owner, b, 4096, 4096, &v));
        OK(npu_buffer_export(owner, v, att, 1, 0, sh->token));
        OK(npu_buffer_export(owner, b, att, 1, 0, sh->token2));
        OK(npu_free(owner, b));
        sh->scenario = 3;
        ck_assert_int_eq(harness_run_as(att_uid, att_gid, att_import_fails, NULL), 0);
        OK(npu_free(owner, v));
        memset(sh->token2, 0, sizeof(sh->token2));

        npu_disconnect(owner);
        other_client_works();
        stop();
}
END_TEST

int main(void)
{
        Suite *s = suite_create("integration-hostile-memory");
        TCase *tc = tcase_create("hostile-memory");
        SRunner *sr;
        int failed;

        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_freed_memory_is_cleared);
        tcase_add_test(tc, test_rss_returns_after_free);
        tcase_add_test(tc, test_view_keeps_quota_charged);
        tcase_add_test(tc, test_export_free_import_charged);
        tcase_add_test(tc, test_reexport_refused);
        tcase_add_test(tc, test_revoke_ends_derived_tokens);
        tcase_add_test(tc, test_freed_buffer_token_ends);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}
