/* Unit tests of the socket paths (proto/socket-path.c): a client of any user connects to
 * $NPU_SOCKET, else the system socket when it exists (or cannot be looked up: connecting
 * then reports permission denied), else its per-user socket; npud's own default is unchanged.
 * Run as root, the per-user cases take an unprivileged effective uid for a while. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/socket-path.h"

#define OTHER_UID 65534

static char dir[64], sys_sock[128];

static void setup(void)
{
        snprintf(dir, sizeof(dir), "/tmp/npud-path-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(dir));
        ck_assert_int_eq(chmod(dir, 0755), 0);
        snprintf(sys_sock, sizeof(sys_sock), "%s/npud.sock", dir);
        unsetenv("NPU_SOCKET");
        setenv("XDG_RUNTIME_DIR", "/run/user/4242", 1);
}

static void teardown(void)
{
        if (geteuid() != getuid())
                ck_assert_int_eq(seteuid(getuid()), 0);
        chmod(dir, 0700);
        unlink(sys_sock);
        rmdir(dir);
}

static void make_system_socket(void)
{
        FILE *f = fopen(sys_sock, "w");
        ck_assert_ptr_nonnull(f);
        fclose(f);
}

/* Run as an ordinary user from here on (seteuid when root; teardown restores it). */
static void become_user(void)
{
        if (geteuid() == 0)
                ck_assert_int_eq(seteuid(OTHER_UID), 0);
}

static const char *client_path(void)
{
        static char buf[128];
        proto_client_socket_path_with(buf, sizeof(buf), sys_sock);
        return buf;
}

START_TEST(test_env_first)
{
        make_system_socket();
        setenv("NPU_SOCKET", "/somewhere/else.sock", 1);
        ck_assert_str_eq(client_path(), "/somewhere/else.sock");
        become_user();
        ck_assert_str_eq(client_path(), "/somewhere/else.sock");
}
END_TEST

START_TEST(test_system_socket_for_every_user)
{
        make_system_socket();
        become_user();
        ck_assert_str_eq(client_path(), sys_sock);
        setenv("NPU_SOCKET", "", 1); /* empty: as unset */
        ck_assert_str_eq(client_path(), sys_sock);
        unsetenv("XDG_RUNTIME_DIR");
        ck_assert_str_eq(client_path(), sys_sock);
}
END_TEST

START_TEST(test_per_user_without_system_socket)
{
        char want[64];

        become_user();
        ck_assert_str_eq(client_path(), "/run/user/4242/npud.sock");
        unsetenv("XDG_RUNTIME_DIR");
        snprintf(want, sizeof(want), "/tmp/npud-%u/npud.sock", (unsigned)geteuid());
        ck_assert_str_eq(client_path(), want);
}
END_TEST

START_TEST(test_unsearchable_system_socket_is_tried)
{
        if (geteuid() != 0)
                return; /* needs a directory this user cannot search */
        make_system_socket();
        ck_assert_int_eq(chmod(dir, 0700), 0);
        become_user();
        ck_assert_str_eq(client_path(), sys_sock);
}
END_TEST

START_TEST(test_daemon_default_unchanged)
{
        char buf[128];

        make_system_socket();
        become_user();
        proto_default_socket_path(buf, sizeof(buf));
        ck_assert_str_eq(buf, "/run/user/4242/npud.sock");
        setenv("NPU_SOCKET", "/x.sock", 1);
        proto_default_socket_path(buf, sizeof(buf));
        ck_assert_str_eq(buf, "/x.sock");
}
END_TEST

START_TEST(test_root_default)
{
        char buf[128];

        if (geteuid() != 0)
                return;
        /* no system socket yet: root's own socket is the system path */
        proto_client_socket_path_with(buf, sizeof(buf), sys_sock);
        ck_assert_str_eq(buf, PROTO_SYSTEM_SOCKET);
        proto_client_socket_path_with(buf, sizeof(buf), NULL);
        ck_assert_str_eq(buf, PROTO_SYSTEM_SOCKET);
}
END_TEST

int main(void)
{
        Suite *s = suite_create("socket-path");
        TCase *tc = tcase_create("client");
        SRunner *sr;
        int failed;

        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_test(tc, test_env_first);
        tcase_add_test(tc, test_system_socket_for_every_user);
        tcase_add_test(tc, test_per_user_without_system_socket);
        tcase_add_test(tc, test_unsearchable_system_socket_is_tried);
        tcase_add_test(tc, test_daemon_default_unchanged);
        tcase_add_test(tc, test_root_default);
        suite_add_tcase(s, tc);
        sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
