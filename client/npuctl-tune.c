/* npuctl tune list [OP] | tune clear [OP]: the kernel tuning cache npud keeps (which GEMM
 * variant won for each operator and shape on this host, and what each variant measured), and
 * forgetting it so that the next graph load measures again (root and the admin group). */
#include <stdio.h>
#include <string.h>

#include "npuctl.h"

static const struct npuctl_col tune_cols[] = {
        { "op", "OP", COL_DEFAULT },
        { "shapes", "SHAPES", COL_DEFAULT },
        { "variant", "CHOSEN", COL_DEFAULT },
        { "times", "MEASURED", COL_DEFAULT },
        { "this_host", "THIS HOST", COL_CSV },
        { "when", "WHEN", COL_CSV },
        { NULL, NULL, 0 },
};

/* argv: "list" [OP] */
static int tune_list(struct npuctl *c, int argc, char **argv)
{
        json_t *params, *res, *e, *v;
        struct npuctl_table *t;
        int code = 0, rc;
        size_t i, k;

        if (npuctl_nargs("tune list", argc, argv, 0, 1) < 0 || npuctl_table_check_fields(c, tune_cols))
                return NPUCTL_USAGE;
        params = argc > 1 ? json_pack("{s:s}", "op", argv[1]) : NULL;
        if (!(res = npuctl_call(c, "tune_list", params, &code)))
                return code;
        if (c->json) {
                npuctl_print_json(res);
                json_decref(res);
                return 0;
        }
        t = npuctl_table_new(tune_cols);
        json_array_foreach(json_object_get(res, "entries"), i, e) {
                char times[256] = "", when[32];
                size_t pos = 0;
                json_array_foreach(json_object_get(e, "variants"), k, v) {
                        json_int_t ns = json_integer_value(json_object_get(v, "ns"));
                        const char *name = json_string_value(json_object_get(v, "name"));
                        int n = !ns ? snprintf(times + pos, sizeof(times) - pos, "%s%s failed",
                                               k ? ", " : "", name ? name : "?")
                              : ns < 1000000 ? snprintf(times + pos, sizeof(times) - pos, "%s%s %.1f us",
                                                        k ? ", " : "", name ? name : "?", (double)ns / 1e3)
                                             : snprintf(times + pos, sizeof(times) - pos, "%s%s %.2f ms",
                                                        k ? ", " : "", name ? name : "?", (double)ns / 1e6);
                        if (n > 0 && (size_t)n < sizeof(times) - pos)
                                pos += (size_t)n;
                }
                npuctl_table_row(t);
                npuctl_table_str(t, "op", json_string_value(json_object_get(e, "op")));
                npuctl_table_str(t, "shapes", json_string_value(json_object_get(e, "shapes")));
                npuctl_table_str(t, "variant", json_string_value(json_object_get(e, "variant")));
                npuctl_table_str(t, "times", times);
                npuctl_table_str(t, "this_host", json_is_true(json_object_get(e, "this_host")) ? "yes" : "no");
                snprintf(when, sizeof(when), "%lld", (long long)json_integer_value(json_object_get(e, "when")));
                npuctl_table_str(t, "when", when);
        }
        rc = npuctl_table_print(c, t);
        npuctl_table_free(t);
        if (!c->csv) {
                const char *file = json_string_value(json_object_get(res, "file"));
                printf("cache: %s; this host: %s\n", file && *file ? npuctl_esc(file) : "in memory only",
                       npuctl_esc(json_string_value(json_object_get(res, "profile"))));
        }
        json_decref(res);
        return rc;
}

/* argv: "clear" [OP] */
static int tune_clear(struct npuctl *c, int argc, char **argv)
{
        json_t *params, *res;
        int code = 0;

        if (npuctl_nargs("tune clear", argc, argv, 0, 1) < 0)
                return NPUCTL_USAGE;
        params = argc > 1 ? json_pack("{s:s}", "op", argv[1]) : NULL;
        if (!(res = npuctl_call(c, "tune_clear", params, &code)))
                return code;
        if (c->json)
                npuctl_print_json(res);
        else
                printf("tuning cache: %lld entries dropped\n",
                       (long long)json_integer_value(json_object_get(res, "dropped")));
        json_decref(res);
        return 0;
}

int npuctl_cmd_tune(struct npuctl *c, int argc, char **argv)
{
        const char *sub = argc > 1 ? argv[1] : "list";

        if (argc < 2) /* "npuctl tune": the listing */
                return tune_list(c, 1, argv);
        if (strcmp(sub, "list") == 0)
                return tune_list(c, argc - 1, argv + 1);
        if (strcmp(sub, "clear") == 0)
                return tune_clear(c, argc - 1, argv + 1);
        fprintf(stderr, "npuctl tune: unknown subcommand '%s' (tune list [OP] | tune clear [OP])\n",
                npuctl_esc(sub));
        return NPUCTL_USAGE;
}
