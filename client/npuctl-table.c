/* npuctl tables: every listing is built once as rows of cells, each cell holding the text a
 * person reads ("1.5 GiB", "12.0%") and the raw value a script wants (1610612736, 0.12); the
 * same rows then print as an aligned table or as CSV, with the columns --fields selects. */
#include <stdlib.h>
#include <string.h>

#include "npuctl.h"

struct cell {
        char *text, *raw;
};

struct npuctl_table {
        const struct npuctl_col *cols;
        int ncols;
        int boxed;
        struct cell *cells; /* nrows x ncols */
        size_t nrows, cap;
};

struct npuctl_table *npuctl_table_new(const struct npuctl_col *cols)
{
        struct npuctl_table *t = calloc(1, sizeof(*t));

        if (!t) {
                perror("npuctl");
                exit(NPUCTL_ERROR);
        }
        t->cols = cols;
        while (cols[t->ncols].key)
                t->ncols++;
        return t;
}

void npuctl_table_free(struct npuctl_table *t)
{
        if (!t)
                return;
        for (size_t i = 0; i < t->nrows * (size_t)t->ncols; i++) {
                free(t->cells[i].text);
                free(t->cells[i].raw);
        }
        free(t->cells);
        free(t);
}

void npuctl_table_boxed(struct npuctl_table *t)
{
        t->boxed = 1;
}

void npuctl_table_row(struct npuctl_table *t)
{
        if (t->nrows == t->cap) {
                size_t cap = t->cap ? t->cap * 2 : 16;
                struct cell *n = realloc(t->cells, cap * (size_t)t->ncols * sizeof(*n));
                if (!n) {
                        perror("npuctl");
                        exit(NPUCTL_ERROR);
                }
                t->cells = n;
                t->cap = cap;
        }
        memset(&t->cells[t->nrows * (size_t)t->ncols], 0, (size_t)t->ncols * sizeof(struct cell));
        t->nrows++;
}

static int col_index(const struct npuctl_col *cols, int ncols, const char *key, size_t len)
{
        for (int i = 0; i < ncols; i++)
                if (strlen(cols[i].key) == len && strncmp(cols[i].key, key, len) == 0)
                        return i;
        return -1;
}

static char *dup_or_die(const char *s)
{
        char *d = strdup(s ? s : "");
        if (!d) {
                perror("npuctl");
                exit(NPUCTL_ERROR);
        }
        return d;
}

void npuctl_table_set(struct npuctl_table *t, const char *key, const char *text, const char *raw)
{
        int i = col_index(t->cols, t->ncols, key, strlen(key));
        struct cell *cl;

        /* a setter for a column the table lacks is a bug in npuctl, not a user error */
        if (i < 0 || !t->nrows) {
                fprintf(stderr, "npuctl: internal error: no column '%s'\n", key);
                abort();
        }
        cl = &t->cells[(t->nrows - 1) * (size_t)t->ncols + (size_t)i];
        free(cl->text);
        free(cl->raw);
        cl->text = dup_or_die(text);
        cl->raw = raw ? dup_or_die(raw) : NULL;
}

void npuctl_table_str(struct npuctl_table *t, const char *key, const char *s)
{
        npuctl_table_set(t, key, s, NULL);
}

void npuctl_table_int(struct npuctl_table *t, const char *key, long long v)
{
        char b[32];
        snprintf(b, sizeof(b), "%lld", v);
        npuctl_table_set(t, key, b, NULL);
}

void npuctl_table_bytes(struct npuctl_table *t, const char *key, uint64_t v)
{
        char text[32], raw[32];
        npuctl_format_bytes((double)v, text, sizeof(text));
        snprintf(raw, sizeof(raw), "%llu", (unsigned long long)v);
        npuctl_table_set(t, key, text, raw);
}

void npuctl_table_num(struct npuctl_table *t, const char *key, const char *fmt, double v)
{
        char text[64], raw[64];
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
        snprintf(text, sizeof(text), fmt, v);
#pragma GCC diagnostic pop
        snprintf(raw, sizeof(raw), "%.9g", v);
        npuctl_table_set(t, key, text, raw);
}

/* The columns to print: --fields in its order, else the defaults of the output form. */
static int select_cols(const struct npuctl *c, const struct npuctl_col *cols, int ncols, int *sel)
{
        int n = 0;

        if (!c->fields) {
                for (int i = 0; i < ncols; i++)
                        if (cols[i].flags & (c->csv ? COL_CSV : COL_TABLE))
                                sel[n++] = i;
                return n;
        }
        for (const char *p = c->fields; *p;) {
                size_t len = strcspn(p, ",");
                int i = col_index(cols, ncols, p, len);
                if (i < 0) {
                        fprintf(stderr, "npuctl: unknown field '%.*s'; fields here:", (int)len, p);
                        for (int k = 0; k < ncols; k++)
                                fprintf(stderr, "%s%s", k ? "," : " ", cols[k].key);
                        fprintf(stderr, "\n");
                        return -1;
                }
                if (n < ncols * 4)
                        sel[n++] = i;
                p += len;
                if (*p == ',')
                        p++;
        }
        return n;
}

int npuctl_table_check_fields(const struct npuctl *c, const struct npuctl_col *cols)
{
        int ncols = 0;

        while (cols[ncols].key)
                ncols++;
        int *sel = calloc((size_t)ncols * 4 + 1, sizeof(int));
        int n = sel ? select_cols(c, cols, ncols, sel) : -1;
        free(sel);
        return n < 0 ? NPUCTL_USAGE : 0;
}

static void csv_field(const char *s)
{
        if (!s[strcspn(s, ",\"\r\n")] && s[0] != ' ') {
                fputs(s, stdout);
                return;
        }
        putchar('"');
        for (; *s; s++) {
                if (*s == '"')
                        putchar('"');
                putchar(*s);
        }
        putchar('"');
}

static void rule(const int *w, int n)
{
        putchar('+');
        for (int i = 0; i < n; i++) {
                for (int k = 0; k < w[i] + 2; k++)
                        putchar('-');
                putchar('+');
        }
        putchar('\n');
}

static void line(const struct npuctl_table *t, const int *sel, const int *w, int n,
                 const char *const *texts)
{
        for (int i = 0; i < n; i++) {
                int right = t->cols[sel[i]].flags & COL_RIGHT;
                if (t->boxed)
                        printf(i ? " | " : "| ");
                else if (i)
                        printf("  ");
                /* the last column of a plain table is not padded: no trailing blanks */
                if (!t->boxed && i == n - 1 && !right)
                        printf("%s", texts[i]);
                else
                        printf(right ? "%*s" : "%-*s", w[i], texts[i]);
        }
        printf(t->boxed ? " |\n" : "\n");
}

int npuctl_table_print(const struct npuctl *c, struct npuctl_table *t)
{
        int *sel = calloc((size_t)t->ncols * 4 + 1, sizeof(int));
        int *w = calloc((size_t)t->ncols * 4 + 1, sizeof(int));
        const char **texts = calloc((size_t)t->ncols * 4 + 1, sizeof(char *));
        int n, r = 0;

        if (!sel || !w || !texts) {
                perror("npuctl");
                exit(NPUCTL_ERROR);
        }
        n = select_cols(c, t->cols, t->ncols, sel);
        if (n < 0) {
                r = NPUCTL_USAGE;
                goto out;
        }
        if (c->csv) {
                for (int i = 0; i < n; i++) {
                        if (i)
                                putchar(',');
                        csv_field(t->cols[sel[i]].key);
                }
                putchar('\n');
                for (size_t row = 0; row < t->nrows; row++) {
                        for (int i = 0; i < n; i++) {
                                const struct cell *cl = &t->cells[row * (size_t)t->ncols + (size_t)sel[i]];
                                if (i)
                                        putchar(',');
                                csv_field(cl->raw ? cl->raw : cl->text ? cl->text : "");
                        }
                        putchar('\n');
                }
                goto out;
        }
        for (int i = 0; i < n; i++) {
                texts[i] = t->cols[sel[i]].head;
                w[i] = (int)strlen(texts[i]);
        }
        for (size_t row = 0; row < t->nrows; row++)
                for (int i = 0; i < n; i++) {
                        const char *s = t->cells[row * (size_t)t->ncols + (size_t)sel[i]].text;
                        if (s && (int)strlen(s) > w[i])
                                w[i] = (int)strlen(s);
                }
        if (t->boxed)
                rule(w, n);
        line(t, sel, w, n, texts);
        if (t->boxed)
                rule(w, n);
        for (size_t row = 0; row < t->nrows; row++) {
                for (int i = 0; i < n; i++) {
                        const char *s = t->cells[row * (size_t)t->ncols + (size_t)sel[i]].text;
                        texts[i] = s ? s : "";
                }
                line(t, sel, w, n, texts);
        }
        if (t->boxed)
                rule(w, n);
out:
        free(sel);
        free(w);
        free(texts);
        return r;
}
