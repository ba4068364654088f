/* The typed admin calls of npu-admin.h, fork safety and npu_reconnect, through the real npud:
 * listings match what the clients hold, admin actions work for root and fail with
 * NPU_ERR_PERMISSION for an unprivileged user, a context used in a forked child fails with
 * NPU_ERR_CONNECTION without disturbing the parent's session, and a context survives an
 * npud restart through npu_reconnect. */
#include <check.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "npu-admin.h"
#include "npu.h"

static struct npud_proc daemon_proc;
static npu_context_t *ctx;

static void setup(void)
{
        ck_assert_int_eq(harness_start(&daemon_proc, NULL), 0);
        ck_assert_int_eq(npu_connect(daemon_proc.sock, &ctx), NPU_OK);
}

static void teardown(void)
{
        npu_disconnect(ctx);
        ctx = NULL;
        ck_assert_int_eq(harness_stop(&daemon_proc), 0);
}

#define OK(expr) ck_assert_msg((expr) == NPU_OK, "%s: %s", #expr, npu_error_message())

/* A round trip of data through device memory: the context works. */
static void roundtrip(npu_context_t *c)
{
        uint8_t out[4096], back[4096];
        npu_buffer_t b;

        for (size_t i = 0; i < sizeof(out); i++)
                out[i] = (uint8_t)(i * 7 + 3);
        OK(npu_malloc(c, 0, sizeof(out), &b));
        OK(npu_memcpy_to_device(c, b, 0, out, sizeof(out)));
        OK(npu_memcpy_from_device(c, back, b, 0, sizeof(back)));
        ck_assert_mem_eq(out, back, sizeof(out));
        OK(npu_free(c, b));
}

/* The session holding `buffers` buffers (the tests' sessions differ by that alone). */
static uint64_t session_with_buffers(npu_context_t *c, uint64_t buffers)
{
        npu_admin_session_t *list;
        size_t n;
        uint64_t id = 0;

        OK(npu_admin_sessions(c, sizeof(*list), &list, &n, NULL));
        for (size_t i = 0; i < n; i++)
                if (list[i].buffers == buffers)
                        id = list[i].id;
        npu_admin_free(list);
        ck_assert_uint_ne(id, 0);
        return id;
}

START_TEST(test_listings)
{
        npu_context_t *other;
        npu_buffer_t b;
        npu_stream_t s;
        npu_admin_session_t *sessions;
        npu_admin_device_t *devs;
        npu_admin_tenant_t *tenants;
        npu_admin_sched_t *sched;
        size_t n, ndevs, ntenants, nsched;
        int all = -1, found = 0;

        OK(npu_connect(daemon_proc.sock, &other));
        OK(npu_malloc(other, 1, 3 << 20, &b));
        OK(npu_stream_create(other, 1, 0, &s));
        OK(npu_memset_async(other, s, b, 0, 1, 1 << 20, NULL));
        OK(npu_stream_synchronize(other, s));

        OK(npu_admin_sessions(ctx, sizeof(*sessions), &sessions, &n, &all));
        ck_assert_int_eq(all, 1); /* root sees every session */
        ck_assert_uint_ge(n, 2);
        for (size_t i = 0; i < n; i++) {
                ck_assert_uint_eq(sessions[i].size, sizeof(npu_admin_session_t));
                ck_assert_int_eq(sessions[i].pid, (int)getpid());
                if (sessions[i].buffers == 1) {
                        found++;
                        ck_assert_uint_eq(sessions[i].buffer_bytes, 3 << 20);
                        ck_assert_uint_eq(sessions[i].streams, 1);
                        ck_assert_uint_ge(sessions[i].tasks_completed, 1);
                        ck_assert_str_ne(sessions[i].comm, "");
                }
        }
        ck_assert_int_eq(found, 1);
        npu_admin_free(sessions);

        OK(npu_admin_devices(ctx, sizeof(*devs), &devs, &ndevs));
        ck_assert_uint_eq(ndevs, 2);
        for (size_t i = 0; i < ndevs; i++) {
                ck_assert_int_eq(devs[i].id, (int)i);
                ck_assert_uint_gt(devs[i].memory_total, 0);
                ck_assert_uint_gt(devs[i].largest_free, 0);
                ck_assert_int_gt(devs[i].cube_cores, 0);
                ck_assert_str_eq(devs[i].health, "ok");
                ck_assert(devs[i].util_cube >= 0 && devs[i].util_cube <= 100);
        }
        ck_assert_uint_ge(devs[1].memory_used, 3 << 20);
        ck_assert_int_eq(devs[1].streams, 1);
        ck_assert_int_eq(devs[1].sessions, 1);
        ck_assert_uint_ge(devs[1].tasks_completed, 1);
        npu_admin_free(devs);

        OK(npu_admin_tenants(ctx, sizeof(*tenants), &tenants, &ntenants));
        ck_assert_uint_ge(ntenants, 1);
        found = 0;
        for (size_t i = 0; i < ntenants; i++)
                if (strcmp(tenants[i].name, npu_tenant(ctx)) == 0) {
                        found = 1;
                        ck_assert_int_ge(tenants[i].sessions, 2);
                        ck_assert_uint_ge(tenants[i].memory_used, 3 << 20);
                        ck_assert_uint_eq(tenants[i].devices & 3, 3);
                        ck_assert_str_ne(tenants[i].sched_class, "");
                }
        ck_assert_int_eq(found, 1);
        npu_admin_free(tenants);

        OK(npu_admin_sched(ctx, sizeof(*sched), &sched, &nsched));
        ck_assert_uint_eq(nsched, 2 * ntenants); /* one per device and tenant */
        found = 0;
        for (size_t i = 0; i < nsched; i++) {
                ck_assert_int_eq(sched[i].device, (int)(i / ntenants));
                if (sched[i].device == 1 && strcmp(sched[i].tenant, npu_tenant(ctx)) == 0) {
                        found = 1;
                        ck_assert_uint_ge(sched[i].tasks, 1);
                        ck_assert(sched[i].share > 0 && sched[i].share <= 1);
                        ck_assert_uint_eq(sched[i].cancelled, 0);
                        ck_assert_int_eq(sched[i].removed, 0);
                }
        }
        ck_assert_int_eq(found, 1);
        npu_admin_free(sched);
        npu_disconnect(other);
}
END_TEST

/* Element sizes: a program built against a newer header (larger elements) gets this
 * library's members, its own stride and zeros after; a size below the first layout is
 * refused with a message. */
START_TEST(test_elem_size)
{
        struct newer { npu_admin_device_t d; uint64_t later[4]; } *list;
        npu_admin_device_t *small;
        size_t n;

        OK(npu_admin_devices(ctx, sizeof(struct newer), (npu_admin_device_t **)&list, &n));
        ck_assert_uint_eq(n, 2);
        for (size_t i = 0; i < n; i++) {
                ck_assert_uint_eq(list[i].d.size, sizeof(npu_admin_device_t));
                ck_assert_int_eq(list[i].d.id, (int)i);
                for (int k = 0; k < 4; k++)
                        ck_assert_uint_eq(list[i].later[k], 0);
        }
        npu_admin_free(list);
        ck_assert_int_eq(npu_admin_devices(ctx, sizeof(size_t), &small, &n), NPU_ERR_INVALID);
        ck_assert_msg(strstr(npu_error_message(), "elem_size"), "%s", npu_error_message());
        ck_assert_int_eq(npu_admin_devices(ctx, sizeof(*small), NULL, &n), NPU_ERR_INVALID);
        npu_admin_free(NULL);
}
END_TEST

START_TEST(test_admin_actions)
{
        npu_context_t *other;
        npu_buffer_t b;
        npu_stream_t s;
        npu_admin_device_t *devs;
        npu_admin_tenant_t *tenants;
        size_t n;
        uint64_t id;

        /* session kill: the other session is gone, its client sees the connection lost */
        OK(npu_connect(daemon_proc.sock, &other));
        OK(npu_malloc(other, 0, 4096, &b));
        id = session_with_buffers(ctx, 1);
        OK(npu_admin_session_kill(ctx, id));
        ck_assert_int_eq(npu_ping(other), NPU_ERR_CONNECTION);
        npu_disconnect(other);
        ck_assert_int_eq(npu_admin_session_kill(ctx, session_with_buffers(ctx, 0)), NPU_ERR_INVALID);
        ck_assert_int_eq(npu_admin_session_kill(ctx, 999999), NPU_ERR_INVALID);

        /* quota: a total quota refuses what goes past it with NPU_ERR_QUOTA */
        OK(npu_admin_quota_set(ctx, npu_tenant(ctx), -1, 1 << 20));
        OK(npu_admin_tenants(ctx, sizeof(*tenants), &tenants, &n));
        for (size_t i = 0; i < n; i++)
                if (strcmp(tenants[i].name, npu_tenant(ctx)) == 0)
                        ck_assert_uint_eq(tenants[i].memory_quota_total, 1 << 20);
        npu_admin_free(tenants);
        ck_assert_int_eq(npu_malloc(ctx, 0, 2 << 20, &b), NPU_ERR_QUOTA);
        OK(npu_admin_quota_set(ctx, npu_tenant(ctx), -1, 0));
        OK(npu_malloc(ctx, 0, 2 << 20, &b));
        OK(npu_free(ctx, b));
        ck_assert_int_eq(npu_admin_quota_set(ctx, "no-such-tenant", -1, 1), NPU_ERR_INVALID);
        ck_assert_msg(strstr(npu_error_message(), "no-such-tenant"), "%s", npu_error_message());
        ck_assert_int_eq(npu_admin_quota_set(ctx, npu_tenant(ctx), 7, 1), NPU_ERR_INVALID);

        /* faults: fail-next fails one task, then work goes on; bad values are refused */
        OK(npu_malloc(ctx, 0, 4096, &b));
        OK(npu_stream_create(ctx, 0, 0, &s));
        OK(npu_admin_fault_inject(ctx, 0, NPU_FAULT_FAIL_NEXT, 1));
        OK(npu_memset_async(ctx, s, b, 0, 0, 4096, NULL));
        ck_assert_int_eq(npu_stream_synchronize(ctx, s), NPU_ERR_DEVICE);
        OK(npu_memset_async(ctx, s, b, 0, 0, 4096, NULL));
        OK(npu_stream_synchronize(ctx, s));
        ck_assert_int_eq(npu_admin_fault_inject(ctx, 0, NPU_FAULT_FAIL_NEXT, 0.5), NPU_ERR_INVALID);
        ck_assert_int_eq(npu_admin_fault_inject(ctx, 0, (npu_fault_t)42, 1), NPU_ERR_INVALID);
        ck_assert_int_eq(npu_admin_fault_inject(ctx, 9, NPU_FAULT_SLOW, 2), NPU_ERR_INVALID);
        OK(npu_admin_fault_inject(ctx, 0, NPU_FAULT_SLOW, 2));
        OK(npu_admin_fault_clear(ctx, 0));

        /* drain shows in the device listing; reset */
        OK(npu_admin_device_drain(ctx, 1, 1));
        OK(npu_admin_devices(ctx, sizeof(*devs), &devs, &n));
        ck_assert_int_eq(devs[1].draining, 1);
        ck_assert_int_eq(devs[0].draining, 0);
        npu_admin_free(devs);
        OK(npu_admin_device_drain(ctx, 1, 0));
        OK(npu_admin_device_reset(ctx, 0));
        roundtrip(ctx);
}
END_TEST

/* Memory per device and who holds it, health with the faults in force, npud's version. */
START_TEST(test_mem_health_version)
{
        npu_admin_mem_t *mem;
        npu_admin_mem_holder_t *h;
        npu_admin_health_t *health;
        npu_admin_version_t v = { .size = sizeof(v) };
        npu_buffer_t b;
        size_t n;
        int all = -1, sessions = 0, tenants = 0;

        OK(npu_malloc(ctx, 0, 1 << 20, &b));
        OK(npu_admin_mem(ctx, -1, sizeof(*mem), &mem, &n));
        ck_assert_uint_eq(n, 2);
        ck_assert_int_eq(mem[0].device, 0);
        ck_assert_int_eq(mem[1].device, 1);
        ck_assert_uint_eq(mem[0].size, sizeof(*mem));
        ck_assert_uint_ge(mem[0].memory_used, 1 << 20);
        ck_assert_uint_gt(mem[0].memory_total, mem[0].memory_used);
        ck_assert_uint_ge(mem[0].free_bytes, mem[0].largest_free);
        ck_assert_uint_gt(mem[0].largest_free, 0);
        ck_assert_uint_ge(mem[0].live_blocks, 1);
        ck_assert(mem[0].fragmentation >= 0 && mem[0].fragmentation <= 1);
        npu_admin_free(mem);
        OK(npu_admin_mem(ctx, 1, sizeof(*mem), &mem, &n));
        ck_assert_uint_eq(n, 1);
        ck_assert_int_eq(mem[0].device, 1);
        npu_admin_free(mem);
        ck_assert_int_eq(npu_admin_mem(ctx, 7, sizeof(*mem), &mem, &n), NPU_ERR_INVALID);
        ck_assert_msg(strstr(npu_error_message(), "7"), "%s", npu_error_message());
        ck_assert_int_eq(npu_admin_mem(ctx, -2, sizeof(*mem), &mem, &n), NPU_ERR_INVALID);
        ck_assert_int_eq(npu_admin_mem(ctx, -1, 8, &mem, &n), NPU_ERR_INVALID);

        /* device 0's holders: this session (the MiB) and its tenant */
        OK(npu_admin_mem_holders(ctx, 0, sizeof(*h), &h, &n, &all));
        ck_assert_int_eq(all, 1);
        for (size_t i = 0; i < n; i++) {
                ck_assert_int_eq(h[i].device, 0);
                if (h[i].kind == NPU_ADMIN_HOLDER_SESSION && h[i].pid == (int)getpid()) {
                        ck_assert_uint_ge(h[i].bytes, 1 << 20);
                        ck_assert_uint_ne(h[i].session, 0);
                        ck_assert_str_eq(h[i].tenant, npu_tenant(ctx));
                        sessions++;
                } else if (h[i].kind == NPU_ADMIN_HOLDER_TENANT &&
                           strcmp(h[i].tenant, npu_tenant(ctx)) == 0) {
                        ck_assert_uint_ge(h[i].bytes, 1 << 20);
                        ck_assert_uint_eq(h[i].session, 0);
                        tenants++;
                }
        }
        ck_assert_int_eq(sessions, 1);
        ck_assert_int_eq(tenants, 1);
        npu_admin_free(h);
        OK(npu_admin_mem_holders(ctx, 1, sizeof(*h), &h, &n, NULL));
        ck_assert_uint_eq(n, 0); /* nobody holds memory on device 1 */
        npu_admin_free(h);
        OK(npu_free(ctx, b));

        /* health: the faults injected, then none */
        OK(npu_admin_fault_inject(ctx, 0, NPU_FAULT_SLOW, 2.5));
        OK(npu_admin_fault_inject(ctx, 1, NPU_FAULT_FAIL_NEXT, 3));
        OK(npu_admin_device_drain(ctx, 1, 1));
        OK(npu_admin_health(ctx, sizeof(*health), &health, &n));
        ck_assert_uint_eq(n, 2);
        ck_assert_str_eq(health[0].health, "ok");
        ck_assert(health[0].slow == 2.5);
        ck_assert_uint_eq(health[0].fail_next, 0);
        ck_assert_int_eq(health[0].draining, 0);
        ck_assert_uint_eq(health[1].fail_next, 3);
        ck_assert(health[1].slow == 1.0);
        ck_assert_int_eq(health[1].draining, 1);
        ck_assert_int_eq(health[1].failed, 0);
        npu_admin_free(health);
        OK(npu_admin_fault_clear(ctx, 0));
        OK(npu_admin_fault_clear(ctx, 1));
        OK(npu_admin_device_drain(ctx, 1, 0));
        OK(npu_admin_fault_inject(ctx, 1, NPU_FAULT_FAIL_DEVICE, 1));
        OK(npu_admin_health(ctx, sizeof(*health), &health, &n));
        ck_assert_int_eq(health[1].failed, 1);
        ck_assert_str_eq(health[1].health, "failed");
        ck_assert(health[0].slow == 1.0);
        npu_admin_free(health);
        OK(npu_admin_device_reset(ctx, 1));

        OK(npu_admin_version(ctx, &v));
        ck_assert_uint_eq(v.size, sizeof(v));
        ck_assert_int_ge(v.protocol, 3);
        ck_assert_int_le(v.protocol_min, v.protocol);
        ck_assert_str_ne(v.version, "");
        ck_assert_str_eq(v.backend, "sim");
        v.size = 8;
        ck_assert_int_eq(npu_admin_version(ctx, &v), NPU_ERR_INVALID);
        ck_assert_int_eq(npu_admin_version(ctx, NULL), NPU_ERR_INVALID);
}
END_TEST

/* npu_admin_reload re-reads the configuration file; a bad one is refused, the old stays. */
START_TEST(test_reload)
{
        struct npud_proc p2;
        char conf[64];
        npu_context_t *c;
        npu_admin_tenant_t *t;
        size_t n;
        FILE *f;

        snprintf(conf, sizeof(conf), "/tmp/npud-admin-api-%d.conf", (int)getpid());
        ck_assert_ptr_nonnull(f = fopen(conf, "w"));
        fputs("{\"tenants\": [{\"name\": \"before\", \"gids\": [0]}]}", f);
        fclose(f);
        const char *extra[] = { "--config", conf, NULL };
        ck_assert_int_eq(harness_start(&p2, extra), 0);
        OK(npu_connect(p2.sock, &c));
        OK(npu_admin_reload(c)); /* unchanged: fine */
        ck_assert_ptr_nonnull(f = fopen(conf, "w"));
        fputs("{\"tenants\": [{\"name\": \"after\", \"gids\": [0]}]}", f);
        fclose(f);
        OK(npu_admin_reload(c));
        OK(npu_admin_tenants(c, sizeof(*t), &t, &n));
        int found = 0;
        for (size_t i = 0; i < n; i++)
                found |= strcmp(t[i].name, "after") == 0;
        ck_assert_int_eq(found, 1);
        npu_admin_free(t);
        ck_assert_ptr_nonnull(f = fopen(conf, "w"));
        fputs("{\"tenants\": [{\"name\": \"bad\", \"class\": \"urgent\"}]}", f);
        fclose(f);
        ck_assert_int_eq(npu_admin_reload(c), NPU_ERR_INVALID);
        ck_assert_msg(strstr(npu_error_message(), "class"), "%s", npu_error_message());
        ck_assert_int_eq(npu_admin_reload(NULL), NPU_ERR_INVALID);
        npu_disconnect(c);
        unlink(conf);
        ck_assert_int_eq(harness_stop(&p2), 0);
}
END_TEST

/* As an unprivileged user: listings answer (sessions only its own), actions are refused
 * with NPU_ERR_PERMISSION. arg: the id of root's session. */
static int unprivileged(void *arg)
{
        uint64_t root_session = *(uint64_t *)arg;
        npu_context_t *c;
        npu_admin_session_t *list;
        npu_admin_device_t *devs;
        size_t n;
        int all = -1;

        OK(npu_connect(daemon_proc.sock, &c));
        OK(npu_admin_sessions(c, sizeof(*list), &list, &n, &all));
        ck_assert_int_eq(all, 0);
        ck_assert_uint_eq(n, 1);
        ck_assert_int_eq(list[0].uid, (int)getuid());
        npu_admin_free(list);
        OK(npu_admin_devices(c, sizeof(*devs), &devs, &n));
        ck_assert_uint_eq(n, 2);
        npu_admin_free(devs);
        ck_assert_int_eq(npu_admin_session_kill(c, root_session), NPU_ERR_PERMISSION);
        ck_assert_msg(strstr(npu_error_message(), "admin"), "%s", npu_error_message());
        ck_assert_int_eq(npu_admin_quota_set(c, npu_tenant(c), -1, 1), NPU_ERR_PERMISSION);
        ck_assert_int_eq(npu_admin_fault_inject(c, 0, NPU_FAULT_FAIL_DEVICE, 1), NPU_ERR_PERMISSION);
        ck_assert_int_eq(npu_admin_fault_clear(c, 0), NPU_ERR_PERMISSION);
        ck_assert_int_eq(npu_admin_device_drain(c, 0, 1), NPU_ERR_PERMISSION);
        ck_assert_int_eq(npu_admin_device_reset(c, 0), NPU_ERR_PERMISSION);
        ck_assert_int_eq(npu_admin_reload(c), NPU_ERR_PERMISSION);

        /* memory, health and version answer; the memory holders are its own sessions only */
        npu_admin_mem_t *mem;
        npu_admin_mem_holder_t *h;
        npu_admin_health_t *health;
        npu_admin_version_t v = { .size = sizeof(v) };
        npu_buffer_t b;
        int mine = 0;
        OK(npu_malloc(c, 0, 8192, &b));
        OK(npu_admin_mem(c, -1, sizeof(*mem), &mem, &n));
        ck_assert_uint_eq(n, 2);
        ck_assert_uint_ge(mem[0].memory_used, 4096 + 8192); /* root's buffer counts too */
        npu_admin_free(mem);
        all = -1;
        OK(npu_admin_mem_holders(c, 0, sizeof(*h), &h, &n, &all));
        ck_assert_int_eq(all, 0);
        for (size_t i = 0; i < n; i++)
                if (h[i].kind == NPU_ADMIN_HOLDER_SESSION) {
                        ck_assert_int_eq(h[i].uid, (int)getuid());
                        mine++;
                }
        ck_assert_int_eq(mine, 1);
        npu_admin_free(h);
        OK(npu_admin_health(c, sizeof(*health), &health, &n));
        ck_assert_uint_eq(n, 2);
        npu_admin_free(health);
        OK(npu_admin_version(c, &v));
        OK(npu_free(c, b));
        OK(npu_ping(c));
        npu_disconnect(c);
        return 0;
}

START_TEST(test_unprivileged)
{
        uid_t uid = 0;
        gid_t gid = 0;
        npu_buffer_t b;
        uint64_t id;

        if (harness_attacker(&uid, &gid) < 0 || uid == 0) {
                fprintf(stderr, "skipped: no unprivileged user\n");
                return;
        }
        ck_assert_int_eq(harness_share_socket(&daemon_proc), 0);
        OK(npu_malloc(ctx, 0, 4096, &b));
        id = session_with_buffers(ctx, 1);
        ck_assert_int_eq(harness_run_as(uid, gid, unprivileged, &id), 0);
        roundtrip(ctx); /* root's session was not killed */
        OK(npu_free(ctx, b));
}
END_TEST

/* A forked child must not use the parent's context: every call fails with
 * NPU_ERR_CONNECTION and says why; the parent's session is untouched (its requests and
 * replies are not interleaved with the child's); npu_reconnect gives the child its own. */
START_TEST(test_fork)
{
        npu_buffer_t b;
        npu_stream_t s;
        int status;

        OK(npu_malloc(ctx, 0, 4096, &b));
        OK(npu_stream_create(ctx, 0, 0, &s));
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
                npu_tensor_t t = { .buf = b, .dtype = NPU_FLOAT32, .ndim = 1, .dims = { 16 } };
                npu_buffer_t c;
                int ok = npu_ping(ctx) == NPU_ERR_CONNECTION && strstr(npu_error_message(), "fork");
                ok &= npu_malloc(ctx, 0, 4096, &c) == NPU_ERR_CONNECTION;
                ok &= npu_memset_async(ctx, s, b, 0, 0, 64, NULL) == NPU_ERR_CONNECTION;
                ok &= npu_launch(ctx, s, "Relu", &t, 1, &t, 1, NULL, 0, NULL) == NPU_ERR_CONNECTION;
                ok &= npu_memcpy_to_device(ctx, b, 0, &t, 16) == NPU_ERR_CONNECTION;
                ok &= npu_flush(ctx) == NPU_ERR_CONNECTION;
                if (!ok)
                        _exit(2);
                /* its own session */
                if (npu_reconnect(ctx) != NPU_OK || npu_ping(ctx) != NPU_OK ||
                    npu_malloc(ctx, 0, 4096, &c) != NPU_OK || npu_free(ctx, c) != NPU_OK)
                        _exit(3);
                npu_disconnect(ctx);
                _exit(0);
        }
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
        /* the parent's session carries on with its handles */
        OK(npu_memset_async(ctx, s, b, 0, 0, 4096, NULL));
        OK(npu_stream_synchronize(ctx, s));
        roundtrip(ctx);
        OK(npu_free(ctx, b));
        ck_assert_uint_eq(session_with_buffers(ctx, 0) != 0, 1);
}
END_TEST

/* npud restarts: the context fails with NPU_ERR_CONNECTION, npu_reconnect fails the same way
 * while npud is away (the context stays usable for another try), then gives a fresh
 * session found through $NPU_SOCKET again; the program rebuilds what it had. */
START_TEST(test_restart)
{
        npu_context_t *c;
        npu_buffer_t b;
        npu_stream_t s;
        npu_region_t r;
        void *p;
        char tenant[64];

        /* the fixture's daemon sets NPU_SOCKET; a NULL socket follows it across restarts */
        OK(npu_connect(NULL, &c));
        snprintf(tenant, sizeof(tenant), "%s", npu_tenant(c));
        OK(npu_malloc(c, 0, 4096, &b));
        OK(npu_stream_create(c, 0, 0, &s));
        OK(npu_host_alloc(c, 4096, &p, &r));
        npu_disconnect(ctx);
        ctx = NULL;
        ck_assert_int_eq(harness_stop(&daemon_proc), 0);

        ck_assert_int_eq(npu_ping(c), NPU_ERR_CONNECTION);
        ck_assert_int_eq(npu_memset_async(c, s, b, 0, 0, 64, NULL), NPU_ERR_CONNECTION);
        ck_assert_int_eq(npu_reconnect(c), NPU_ERR_CONNECTION);
        ck_assert_int_eq(npu_ping(c), NPU_ERR_CONNECTION);

        ck_assert_int_eq(harness_start(&daemon_proc, NULL), 0); /* a new socket path */
        OK(npu_reconnect(c));
        OK(npu_ping(c));
        ck_assert_str_eq(npu_tenant(c), tenant);
        /* the old session's handles are gone: this session holds nothing */
        npu_admin_session_t *list;
        size_t n;
        OK(npu_admin_sessions(c, sizeof(*list), &list, &n, NULL));
        ck_assert_uint_eq(n, 1);
        ck_assert_uint_eq(list[0].buffers, 0);
        ck_assert_uint_eq(list[0].streams, 0);
        npu_admin_free(list);
        roundtrip(c);
        OK(npu_stream_create(c, 0, 0, &s));
        OK(npu_stream_synchronize(c, s));
        npu_disconnect(c);
        OK(npu_connect(daemon_proc.sock, &ctx)); /* for the teardown */
}
END_TEST

int main(void)
{
        Suite *s = suite_create("integration-admin-api");
        TCase *tc = tcase_create("admin-api");
        SRunner *sr;
        int failed;

        signal(SIGPIPE, SIG_IGN);
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_listings);
        tcase_add_test(tc, test_elem_size);
        tcase_add_test(tc, test_admin_actions);
        tcase_add_test(tc, test_mem_health_version);
        tcase_add_test(tc, test_reload);
        tcase_add_test(tc, test_unprivileged);
        tcase_add_test(tc, test_fork);
        tcase_add_test(tc, test_restart);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}
