/* npuctl tables: every listing is built once as rows of cells, each cell holding the text a
 * person reads ("1.5 GiB", "12.0%") and the raw value a script wants (1610612736, 0.12); the
 * same rows then print as an aligned table or as CSV, with the columns --fields selects. */
#include <stdlib.h>
#include <string.h>

#include "npuctl.h"

/* ---- escaping text from outside (see npuctl.h) ---- */

/* Length (2-4) and code point of the valid UTF-8 sequence at s, or 0 when there is none: a
 * stray continuation byte, an overlong form, a surrogate, a value past U+10FFFF, a sequence
 * cut short (the terminating NUL is not a continuation byte). */
static int utf8_seq(const unsigned char *s, unsigned *ret_cp)
{
        unsigned cp, min;
        int n;

        if (s[0] >= 0xc2 && s[0] <= 0xdf) {
                n = 2, cp = s[0] & 0x1fu, min = 0x80;
        } else if (s[0] >= 0xe0 && s[0] <= 0xef) {
                n = 3, cp = s[0] & 0x0fu, min = 0x800;
        } else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
                n = 4, cp = s[0] & 0x07u, min = 0x10000;
        } else {
                return 0;
        }
        for (int i = 1; i < n; i++) {
                if ((s[i] & 0xc0) != 0x80)
                        return 0;
                cp = cp << 6 | (s[i] & 0x3fu);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        *ret_cp = cp;
        return n;
}

/* Code points a terminal acts on or that reorder or break what follows. */
static int unsafe_cp(unsigned cp)
{
        return cp <= 0x9f || (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069) ||
               cp == 0x2028 || cp == 0x2029;
}

/* Write the escaped s to out (NULL: only measure); the length written, without the NUL. */
static size_t escape_into(const char *s, char *out)
{
        static const char hex[] = "0123456789abcdef";
        const unsigned char *p = (const unsigned char *)s;
        size_t len = 0;
        char tmp[8];

        while (*p) {
                unsigned cp = 0;
                int n = 1, k = 0;
                if (*p >= 0x20 && *p < 0x7f && *p != '\\') {
                        tmp[k++] = (char)*p;
                } else if (*p == '\\') {
                        tmp[k++] = '\\';
                        tmp[k++] = '\\';
                } else if (*p >= 0x80 && (n = utf8_seq(p, &cp)) > 0 && !unsafe_cp(cp)) {
                        memcpy(tmp, p, (size_t)n);
                        k = n;
                } else if (*p >= 0x80 && n > 0) {
                        /* a valid sequence of a code point to hide: \u009b, \u202e */
                        tmp[k++] = '\\';
                        tmp[k++] = 'u';
                        for (int sh = 12; sh >= 0; sh -= 4)
                                tmp[k++] = hex[(cp >> sh) & 0xf];
                } else {
                        /* C0, DEL, or a byte that is not UTF-8: \x1b, \x9b */
                        n = 1;
                        tmp[k++] = '\\';
                        tmp[k++] = 'x';
                        tmp[k++] = hex[*p >> 4];
                        tmp[k++] = hex[*p & 0xf];
                }
                if (out)
                        memcpy(out + len, tmp, (size_t)k);
                len += (size_t)k;
                p += n;
        }
        if (out)
                out[len] = 0;
        return len;
}

char *npuctl_escape(const char *s)
{
        char *out;

        if (!s)
                s = "";
        out = malloc(escape_into(s, NULL) + 1);
        if (!out) {
                perror("npuctl");
                exit(NPUCTL_ERROR);
        }
        escape_into(s, out);
        return out;
}

static char **esc_pool;
static size_t esc_n, esc_cap;

void npuctl_esc_release(void)
{
        for (size_t i = 0; i < esc_n; i++)
                free(esc_pool[i]);
        esc_n = 0;
}

const char *npuctl_esc(const char *s)
{
        char *e;

        if (!s)
                return NULL;
        e = npuctl_escape(s);
        if (strcmp(e, s) == 0) {
                free(e);
                return s;
        }
        if (esc_n == esc_cap) {
                size_t cap = esc_cap ? esc_cap * 2 : 32;
                char **n = realloc(esc_pool, cap * sizeof(*n));
                if (!n) {
                        perror("npuctl");
                        exit(NPUCTL_ERROR);
                }
                if (!esc_pool)
                        atexit(npuctl_esc_release);
                esc_pool = n;
                esc_cap = cap;
        }
        esc_pool[esc_n++] = e;
        return e;
}

char *npuctl_json_text(json_t *v, int indent)
{
        size_t flags = JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER | (indent ? JSON_INDENT(2) : JSON_COMPACT);
        char *s = json_dumps(v, flags), *out;
        size_t dels = 0, k = 0;

        if (!s)
                return NULL;
        /* ASCII now, but jansson leaves DEL raw; in JSON it can only be inside a string */
        for (const char *p = s; *p; p++)
                dels += *p == 0x7f;
        if (!dels)
                return s;
        out = malloc(strlen(s) + dels * 5 + 1);
        if (out) {
                for (const char *p = s; *p; p++) {
                        if (*p == 0x7f) {
                                memcpy(out + k, "\\u007f", 6);
                                k += 6;
                        } else {
                                out[k++] = *p;
                        }
                }
                out[k] = 0;
        }
        free(s);
        return out;
}

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
        /* the one way into a cell: tables and CSV never show a string unescaped */
        cl->text = npuctl_escape(text);
        cl->raw = raw ? npuctl_escape(raw) : NULL;
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
                        char *f = strndup(p, len);
                        fprintf(stderr, "npuctl: unknown field '%s'; fields here:", npuctl_esc(f ? f : "?"));
                        free(f);
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
        /* --fields help: the field names, one a line (bash completion asks this way) */
        if (c->fields && strcmp(c->fields, "help") == 0) {
                for (int i = 0; i < ncols; i++)
                        printf("%s\n", cols[i].key);
                exit(NPUCTL_OK);
        }
        int *sel = calloc((size_t)ncols * 4 + 1, sizeof(int));
        int n = sel ? select_cols(c, cols, ncols, sel) : -1;
        free(sel);
        return n < 0 ? NPUCTL_USAGE : 0;
}

/* --watch --csv has printed its one header line */
static int csv_header_done;

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
                if (!(c->stamp[0] && csv_header_done)) {
                        if (c->stamp[0])
                                fputs(n ? "timestamp," : "timestamp", stdout);
                        for (int i = 0; i < n; i++) {
                                if (i)
                                        putchar(',');
                                csv_field(t->cols[sel[i]].key);
                        }
                        putchar('\n');
                }
                /* a log (--watch --csv): one header; rows of every refresh follow it */
                if (c->stamp[0])
                        csv_header_done = 1;
                for (size_t row = 0; row < t->nrows; row++) {
                        if (c->stamp[0])
                                printf(n ? "%s," : "%s", c->stamp);
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
