/* The stand-in nvcc's source rewriter (tools/cuda-sim): reads a preprocessed .cu file
 * and writes host C++ that the device prelude (cuda_sim_device.h) can compile:
 *
 *   k<<<grid, block, shmem, stream>>>(args)
 *       -> ::cuda_sim::launch(::cuda_sim::cfg(grid, block, shmem, stream), "k", "FILE",
 *                           LINE, BOUND, [](auto &&...a) { k(a...); }, args)
 *   __launch_bounds__(N) ... k(          -> removed; N becomes k's BOUND at its launches
 *   __shared__ float a[8];               -> a static key of type float[8], and a made a
 *                                           reference to the running block's slot for it
 *
 * Every newline of the input is kept, so the preprocessor's line markers still name the
 * right lines in compiler errors and in the stand-in's messages. Strings, characters
 * and line markers are copied untouched.
 *
 * Usage: nvcc-rewrite IN.ii OUT.ii    (exit 1 with "file:line: message" on an error) */
#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct text {
    char *s;
    size_t n, cap;
} text;

static void put(text *t, const char *s, size_t n)
{
    if (t->n + n + 1 > t->cap) {
        t->cap = (t->n + n + 1) * 2;
        t->s = realloc(t->s, t->cap);
        if (!t->s) {
            perror("nvcc-rewrite");
            exit(1);
        }
    }
    memcpy(t->s + t->n, s, n);
    t->n += n;
    t->s[t->n] = 0;
}

static void puts_(text *t, const char *s) { put(t, s, strlen(s)); }

static void putf(text *t, const char *fmt, ...)
{
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    put(t, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

/* The newlines of s[a, b): what a replacement must keep. */
static void put_newlines(text *t, const char *s, size_t a, size_t b)
{
    for (size_t i = a; i < b; i++)
        if (s[i] == '\n') put(t, "\n", 1);
}

static const char *in;
static size_t len;
static const char *in_name;

/* Where position p is, from the line markers before it, for messages. */
static void where(size_t p, char *file, size_t cap, int *line)
{
    snprintf(file, cap, "%s", in_name);
    *line = 1;
    size_t i = 0;
    while (i < p) {
        if ((i == 0 || in[i - 1] == '\n') && in[i] == '#') {
            const char *q = in + i + 1;
            while (*q == ' ') q++;
            if (isdigit((unsigned char)*q)) {
                int l = atoi(q);
                while (isdigit((unsigned char)*q)) q++;
                while (*q == ' ') q++;
                if (*q == '"') {
                    const char *e = strchr(q + 1, '"');
                    if (e && (size_t)(e - q - 1) < cap) {
                        memcpy(file, q + 1, (size_t)(e - q - 1));
                        file[e - q - 1] = 0;
                    }
                }
                *line = l - 1; /* the marker names the line after it */
            }
        }
        if (in[i] == '\n') (*line)++;
        i++;
    }
}

static void die_at(size_t p, const char *fmt, ...)
{
    char file[1024], msg[1024];
    int line;
    where(p, file, sizeof file, &line);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s:%d: error (cuda-sim nvcc): %s\n", file, line, msg);
    exit(1);
}

static int ident_start(int c) { return isalpha(c) || c == '_'; }
static int ident_char(int c) { return isalnum(c) || c == '_'; }

/* The end of the string or character literal starting at p (p at the quote). */
static size_t skip_literal(size_t p)
{
    char q = in[p];
    size_t i = p + 1;
    while (i < len && in[i] != q) {
        if (in[i] == '\\')
            i++;
        else if (in[i] == '\n' && q == '\'')
            return i; /* not a literal after all */
        i++;
    }
    return i < len ? i + 1 : len;
}

/* The end of a raw string R"delim( ... )delim" starting at p (p at the quote). */
static size_t skip_raw(size_t p)
{
    size_t i = p + 1, d0 = i;
    while (i < len && in[i] != '(') i++;
    char delim[32];
    size_t dn = i - d0 < sizeof delim - 2 ? i - d0 : sizeof delim - 2;
    delim[0] = ')';
    memcpy(delim + 1, in + d0, dn);
    delim[dn + 1] = '"';
    delim[dn + 2] = 0;
    const char *e = strstr(in + i, delim);
    return e ? (size_t)(e - in) + dn + 2 : len;
}

/* From p (after an opening bracket at p - 1), the position just past its matching
 * closing bracket; strings and characters skipped. */
static size_t skip_group(size_t p, char open, char close)
{
    int depth = 1;
    size_t i = p;
    while (i < len && depth > 0) {
        char c = in[i];
        if (c == '"' || (c == '\'' && !(i > 0 && isalnum((unsigned char)in[i - 1])))) {
            i = skip_literal(i);
            continue;
        }
        if (c == open)
            depth++;
        else if (c == close)
            depth--;
        i++;
    }
    if (depth) die_at(p, "unbalanced '%c'", open);
    return i;
}

/* The first place from `from` on where `what` stands outside any bracket, string or
 * character literal; len when nowhere. */
static size_t find_top_level(size_t from, const char *what)
{
    size_t wn = strlen(what);
    int depth = 0;
    for (size_t i = from; i + wn <= len; i++) {
        char c = in[i];
        if (c == '"' || c == '\'') {
            i = skip_literal(i) - 1;
            continue;
        }
        if (depth == 0 && !memcmp(in + i, what, wn)) return i;
        if (c == '(' || c == '[' || c == '{')
            depth++;
        else if (c == ')' || c == ']' || c == '}')
            depth--;
    }
    return len;
}

static size_t skip_space(size_t p)
{
    while (p < len && isspace((unsigned char)in[p])) p++;
    return p;
}

/* Kernel name -> its __launch_bounds__ text, in the order declared. */
typedef struct bound {
    char name[256];
    char value[256];
} bound;
static bound bounds[4096];
static int n_bounds;

static const char *bound_of(const char *name)
{
    for (int i = n_bounds - 1; i >= 0; i--)
        if (!strcmp(bounds[i].name, name)) return bounds[i].value;
    return "0";
}

/* __launch_bounds__ at p (the identifier's start): records the bound for the next
 * function name and returns the position after the attribute's parentheses. */
static size_t launch_bounds(size_t p, text *out)
{
    size_t q = skip_space(p + strlen("__launch_bounds__"));
    if (q >= len || in[q] != '(') die_at(p, "__launch_bounds__ without '('");
    size_t end = skip_group(q + 1, '(', ')');
    /* the first argument: up to a comma at the top level */
    size_t a = q + 1, b = a;
    int depth = 0;
    for (; b < end - 1; b++) {
        if (in[b] == '(' || in[b] == '[' || in[b] == '{')
            depth++;
        else if (in[b] == ')' || in[b] == ']' || in[b] == '}')
            depth--;
        else if (in[b] == ',' && depth == 0)
            break;
    }
    /* the function it applies to: the next identifier followed by '(' */
    size_t i = end;
    char name[256] = "";
    while (i < len) {
        i = skip_space(i);
        if (ident_start((unsigned char)in[i])) {
            size_t s = i;
            while (i < len && ident_char((unsigned char)in[i])) i++;
            size_t k = skip_space(i);
            if (k < len && in[k] == '(' && i - s < sizeof name) {
                memcpy(name, in + s, i - s);
                name[i - s] = 0;
                break;
            }
            continue;
        }
        if (in[i] == '(' || in[i] == ';' || in[i] == '{') break;
        i++;
    }
    if (!name[0]) die_at(p, "__launch_bounds__: no function name follows");
    if (n_bounds == (int)(sizeof bounds / sizeof *bounds)) die_at(p, "too many kernels");
    bound *bd = &bounds[n_bounds++];
    snprintf(bd->name, sizeof bd->name, "%s", name);
    size_t vn = b - a < sizeof bd->value - 3 ? b - a : sizeof bd->value - 3;
    bd->value[0] = '(';
    memcpy(bd->value + 1, in + a, vn);
    bd->value[vn + 1] = ')';
    bd->value[vn + 2] = 0;
    for (char *c = bd->value; *c; c++)
        if (*c == '\n') *c = ' ';
    put_newlines(out, in, p, end);
    return end;
}

static int shared_serial;
static int brace_depth; /* { } outside literals, for where a __shared__ declaration is */

/* __shared__ at p: the declaration to the next ';' declares, for each of its names, a
 * static key of the variable's type under another name, and the name becomes a
 * reference to the running block's slot for that key:
 *   __shared__ float a[8], b;  ->  static float cuda_sim_key_0_a[8], cuda_sim_key_1_b;
 *                                  auto &a = *::cuda_sim::shared_slot(&cuda_sim_key_0_a); ... */
static size_t shared_decl(size_t p, const char *prev_word, text *out)
{
    if (!strcmp(prev_word, "extern"))
        die_at(p, "extern __shared__ (dynamic shared memory) is not supported by the stand-in");
    if (brace_depth == 0)
        die_at(p, "a __shared__ variable outside a function is not supported by the stand-in");
    size_t a = p + strlen("__shared__"), i = find_top_level(a, ";");
    if (i >= len) die_at(p, "__shared__ declaration without ';'");
    /* the declarators: split at top-level commas; each name is the last identifier
     * before its first '[' or '=' */
    enum { MAX_NAMES = 32 };
    size_t name_at[MAX_NAMES], name_end[MAX_NAMES];
    int n = 0;
    size_t s0 = a;
    int depth = 0;
    for (size_t k = a; k <= i; k++) {
        char c = in[k];
        if (k < i && (c == '(' || c == '[' || c == '{'))
            depth++;
        else if (k < i && (c == ')' || c == ']' || c == '}'))
            depth--;
        if (k < i && !(c == ',' && depth == 0)) continue;
        size_t e = s0;
        int d2 = 0;
        while (e < k && !((in[e] == '[' || in[e] == '=') && d2 == 0)) {
            if (in[e] == '(')
                d2++;
            else if (in[e] == ')')
                d2--;
            e++;
        }
        size_t ne = e;
        while (ne > s0 && !ident_char((unsigned char)in[ne - 1])) ne--;
        size_t ns = ne;
        while (ns > s0 && ident_char((unsigned char)in[ns - 1])) ns--;
        if (ns == ne || n == MAX_NAMES) die_at(p, "__shared__: cannot find the declared names");
        name_at[n] = ns, name_end[n++] = ne;
        s0 = k + 1;
    }
    int first = shared_serial;
    if (strcmp(prev_word, "static")) puts_(out, "static");
    size_t from = a;
    for (int k = 0; k < n; k++) { /* the keys: the declaration with the names renamed */
        put(out, in + from, name_at[k] - from);
        putf(out, "cuda_sim_key_%d_", first + k);
        put(out, in + name_at[k], name_end[k] - name_at[k]);
        from = name_end[k];
    }
    put(out, in + from, i - from);
    put(out, ";", 1);
    for (int k = 0; k < n; k++) {
        int ln = (int)(name_end[k] - name_at[k]);
        putf(out, " auto &%.*s = *::cuda_sim::shared_slot(&cuda_sim_key_%d_%.*s);", ln,
             in + name_at[k], first + k, ln, in + name_at[k]);
    }
    shared_serial += n;
    return i + 1;
}

/* k<<<...>>>(...) with "<<<" at p: the kernel's expression is taken back off the end of
 * out (it was copied already). */
static size_t launch(size_t p, text *out)
{
    /* the kernel: an identifier, maybe qualified, maybe with template arguments */
    size_t e = out->n;
    while (e > 0 && isspace((unsigned char)out->s[e - 1])) e--;
    size_t b = e;
    if (b > 0 && out->s[b - 1] == '>') {
        int depth = 0;
        while (b > 0) {
            char c = out->s[b - 1];
            if (c == '>')
                depth++;
            else if (c == '<')
                depth--;
            b--;
            if (depth == 0) break;
        }
        while (b > 0 && isspace((unsigned char)out->s[b - 1])) b--;
    }
    size_t name_end = b;
    for (;;) {
        while (b > 0 && ident_char((unsigned char)out->s[b - 1])) b--;
        if (b >= 2 && out->s[b - 1] == ':' && out->s[b - 2] == ':') {
            b -= 2;
            continue;
        }
        break;
    }
    if (b == name_end) die_at(p, "<<< without a kernel name before it");
    char expr[512], base[256];
    size_t en = e - b < sizeof expr - 1 ? e - b : sizeof expr - 1;
    memcpy(expr, out->s + b, en);
    expr[en] = 0;
    size_t bs = name_end;
    while (bs > b && ident_char((unsigned char)out->s[bs - 1])) bs--;
    size_t bn = name_end - bs < sizeof base - 1 ? name_end - bs : sizeof base - 1;
    memcpy(base, out->s + bs, bn);
    base[bn] = 0;
    for (char *c = expr; *c; c++)
        if (*c == '\n') *c = ' ';
    out->n = b;
    out->s[b] = 0;

    /* the configuration, to ">>>" */
    size_t cfg = p + 3, i = find_top_level(cfg, ">>>");
    if (i >= len) die_at(p, "<<< without >>>");
    size_t cfg_end = i, after = skip_space(i + 3);
    if (after >= len || in[after] != '(') die_at(p, "a launch without its arguments");
    size_t args_end = skip_group(after + 1, '(', ')');
    size_t a0 = skip_space(after + 1);
    bool has_args = a0 < args_end - 1;
    /* the launch's place, as __FILE__ and __LINE__ would say (the text is preprocessed) */
    char file[1024], quoted[2100];
    int line;
    where(p, file, sizeof file, &line);
    size_t qn = 0;
    for (const char *c = file; *c && qn < sizeof quoted - 3; c++) {
        if (*c == '"' || *c == '\\') quoted[qn++] = '\\';
        quoted[qn++] = *c;
    }
    quoted[qn] = 0;
    putf(out, "::cuda_sim::launch(::cuda_sim::cfg(");
    put(out, in + cfg, cfg_end - cfg);
    putf(out, "), \"%s\", \"%s\", %d, %s, [](auto &&...cuda_sim_a) { %s(cuda_sim_a...); }", base,
         quoted, line, bound_of(base), expr);
    put_newlines(out, in, cfg_end, after + 1);
    if (has_args) {
        put(out, ", ", 2);
        put(out, in + after + 1, args_end - 1 - (after + 1));
    }
    put(out, ")", 1);
    return args_end;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: nvcc-rewrite IN.ii OUT.ii\n");
        return 2;
    }
    in_name = argv[1];
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    text src = {0};
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) put(&src, buf, n);
    fclose(f);
    in = src.s ? src.s : "";
    len = src.n;

    text out = {0};
    char prev_word[64] = "";
    size_t i = 0;
    while (i < len) {
        char c = in[i];
        if (c == '#' && (i == 0 || in[i - 1] == '\n')) { /* a line marker or pragma */
            size_t e = i;
            while (e < len && in[e] != '\n') e++;
            put(&out, in + i, e - i);
            i = e;
            continue;
        }
        if (c == 'R' && i + 1 < len && in[i + 1] == '"' &&
            !(i > 0 && ident_char((unsigned char)in[i - 1]))) {
            size_t e = skip_raw(i + 1);
            put(&out, in + i, e - i);
            i = e;
            continue;
        }
        if (c == '"' || (c == '\'' && !(i > 0 && isalnum((unsigned char)in[i - 1])))) {
            size_t e = skip_literal(i);
            put(&out, in + i, e - i);
            i = e;
            continue;
        }
        if (ident_start((unsigned char)c) && !(i > 0 && ident_char((unsigned char)in[i - 1]))) {
            size_t e = i;
            while (e < len && ident_char((unsigned char)in[e])) e++;
            size_t wn = e - i;
            if (wn == 17 && !memcmp(in + i, "__launch_bounds__", 17)) {
                i = launch_bounds(i, &out);
                continue;
            }
            if (wn == 10 && !memcmp(in + i, "__shared__", 10)) {
                /* "static __shared__": the static is out already, keep one */
                i = shared_decl(i, prev_word, &out);
                prev_word[0] = 0;
                continue;
            }
            put(&out, in + i, wn);
            size_t cn = wn < sizeof prev_word - 1 ? wn : sizeof prev_word - 1;
            memcpy(prev_word, in + i, cn);
            prev_word[cn] = 0;
            i = e;
            continue;
        }
        if (c == '<' && i + 2 < len && in[i + 1] == '<' && in[i + 2] == '<') {
            i = launch(i, &out);
            prev_word[0] = 0;
            continue;
        }
        if (!isspace((unsigned char)c)) prev_word[0] = 0;
        if (c == '{')
            brace_depth++;
        else if (c == '}')
            brace_depth--;
        put(&out, &c, 1);
        i++;
    }
    FILE *o = fopen(argv[2], "wb");
    if (!o || fwrite(out.s ? out.s : "", 1, out.n, o) != out.n || fclose(o)) {
        perror(argv[2]);
        return 1;
    }
    return 0;
}
