/* A RoPE adapter in C, served over the process protocol: the template for an implementation in a compiled language.
 *
 *     cd spec_tests/examples/c_adapter && cc -std=c99 -O2 -o rope_adapter adapter.c protocol.c -lm
 *     REFPOS_PROCESS=$PWD/rope_adapter refpos suite --impl spec_tests.adapters.process
 *
 * It provides rope_frequencies, rope_cos_sin and apply_rope for the rules `default` and `linear`, the `half` and
 * `interleaved` layouts and the `first` placement (partial rotary included), in float64, written from the math:
 *
 *     ω_j = θ^(−2j/d) / s            (s = 1 for default, the factor for linear), j = 0 … d/2 − 1
 *     φ = p·ω_j,  (u, v) → (u·cos φ − v·sin φ, v·cos φ + u·sin φ)   for each pair (u, v) of the layout
 *
 * half pairs channels (j, j + d/2), interleaved (2j, 2j + 1); channels d … head_dim − 1 pass through. What it does
 * not implement (other rules, layouts and placements, M-RoPE) is NotImplementedError, which the suite reports as
 * skips; a key or value the contract does not define is ValueError, a wrong type TypeError: the contract's line
 * (spec_tests/README.md). Every other contract function is absent, so its tests are skips.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol.h"

static const char INFO[] =
    "{\"name\": \"c example adapter\", \"dtype\": \"float64\", \"rope_layout\": \"half\","
    " \"rope_types\": [\"default\", \"linear\"], \"rope_layouts\": [\"half\", \"interleaved\"],"
    " \"rope_placements\": [\"first\"], \"mrope\": [], \"vision_forms\": [],"
    " \"description\": \"spec_tests/examples/c_adapter: RoPE in C over the process protocol\"}";

/* the contract's lists, told by the proxy's __hello__ (they grow with refpos: nothing is copied here) */
#define MAX_LIST 128
static char *rope_keys[MAX_LIST], *rope_types[MAX_LIST], *layouts[MAX_LIST], *placements[MAX_LIST];
static size_t n_rope_keys, n_rope_types, n_layouts, n_placements;

static void keep(const jval *list, char **out, size_t *n) {
    while (*n) free(out[--*n]);  /* a second greeting replaces the first */
    for (size_t i = 0; list && list->type == J_ARR && i < list->n && *n < MAX_LIST; i++) {
        const char *s = list->items[i].str;
        if (list->items[i].type == J_STR && (out[*n] = malloc(strlen(s) + 1))) strcpy(out[(*n)++], s);
    }
}

static void hello(const jval *args) {
    keep(jget(args, "rope_keys"), rope_keys, &n_rope_keys);
    keep(jget(args, "rope_types"), rope_types, &n_rope_types);
    keep(jget(args, "layouts"), layouts, &n_layouts);
    keep(jget(args, "placements"), placements, &n_placements);
}

static int listed(char *const *list, size_t n, const char *s) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(list[i], s)) return 1;
    return 0;
}

/* ------------------------------------------------------------------------------------ the rope dict */
typedef struct {
    long long head_dim, d; /* the head size and the rotated width */
    double theta, scale;   /* θ and the divisor of the frequencies (the linear factor) */
    int interleaved;
} rope;

static const char *text_or(const jval *v, const char *fallback) { return jnull(v) ? fallback : v->str; }

/* the rope dict's geometry and rule, or -1 with the error in out */
static int read_rope(const jval *args, rope *g, reply *out) {
    const jval *dict = jget(args, "rope");
    if (!dict || dict->type != J_OBJ) return reply_error(out, "TypeError", "rope must be a dict");
    for (size_t i = 0; i < dict->n; i++)
        if (!listed(rope_keys, n_rope_keys, dict->keys[i]))
            return reply_error(out, "ValueError", "unknown rope key %s", dict->keys[i]);
    const char *names[] = {"rope_type", "layout", "placement"};
    for (int i = 0; i < 3; i++) {
        const jval *v = jget(dict, names[i]);
        if (!jnull(v) && v->type != J_STR) return reply_error(out, "TypeError", "%s must be a string", names[i]);
    }
    const char *kind = text_or(jget(dict, "rope_type"), "default");
    const char *layout = text_or(jget(dict, "layout"), "half");
    const char *placement = text_or(jget(dict, "placement"), "first");
    if (!listed(rope_types, n_rope_types, kind)) return reply_error(out, "ValueError", "rope_type %s is not one of the contract's", kind);
    if (!listed(layouts, n_layouts, layout)) return reply_error(out, "ValueError", "layout %s is not one of the contract's", layout);
    if (!listed(placements, n_placements, placement))
        return reply_error(out, "ValueError", "placement %s is not one of the contract's", placement);
    if (strcmp(kind, "default") && strcmp(kind, "linear"))
        return reply_error(out, "NotImplementedError", "rope_type %s (this adapter has default and linear)", kind);
    if (!strcmp(layout, "deinterleaved")) return reply_error(out, "NotImplementedError", "layout deinterleaved");
    if (strcmp(placement, "first")) return reply_error(out, "NotImplementedError", "placement %s", placement);
    if (!jnull(jget(dict, "mrope_section")) || !jnull(jget(dict, "mrope_assignment")))
        return reply_error(out, "NotImplementedError", "M-RoPE");
    const jval *head = jget(dict, "head_dim"), *rotary = jget(dict, "rotary_dim");
    const jval *fraction = jget(dict, "partial_rotary_factor"), *theta = jget(dict, "rope_theta");
    const jval *factor = jget(dict, "factor");
    if (!head || !head->is_int || head->integer < 1) return reply_error(out, "ValueError", "head_dim must be an integer >= 1");
    g->head_dim = head->integer;
    g->d = g->head_dim;
    if (!jnull(fraction)) {
        if (fraction->type != J_NUM || !(fraction->num > 0 && fraction->num <= 1))
            return reply_error(out, "ValueError", "partial_rotary_factor must be in (0, 1]");
        g->d = (long long)((double)g->head_dim * fraction->num);
    }
    if (!jnull(rotary)) {
        if (!rotary->is_int) return reply_error(out, "ValueError", "rotary_dim must be an integer");
        if (!jnull(fraction) && rotary->integer != g->d)
            return reply_error(out, "ValueError", "rotary_dim %lld and partial_rotary_factor disagree", rotary->integer);
        g->d = rotary->integer;
    }
    if (g->d < 2 || g->d % 2 || g->d > g->head_dim)
        return reply_error(out, "ValueError", "the rotary width must be even and in [2, head_dim], got %lld", g->d);
    g->theta = jnull(theta) ? 10000.0 : theta->num;
    if ((!jnull(theta) && theta->type != J_NUM) || !(g->theta > 0) || isinf(g->theta))
        return reply_error(out, "ValueError", "rope_theta must be a finite number > 0");
    g->scale = 1.0;
    if (!strcmp(kind, "linear")) {
        if (jnull(factor) || factor->type != J_NUM || !(factor->num >= 1) || isinf(factor->num))
            return reply_error(out, "ValueError", "linear needs a factor >= 1");
        g->scale = factor->num;
    }
    g->interleaved = !strcmp(layout, "interleaved");
    return 0;
}

static double omega(const rope *g, long long j) { return pow(g->theta, -(double)(2 * j) / (double)g->d) / g->scale; }

/* the positions argument: an integer array of non-negative values */
static const npy *read_positions(const jval *args, const npy *arrays, size_t n, reply *out) {
    const npy *p = arg_array(args, arrays, n, "positions", out);
    if (!p) return NULL;
    if (strcmp(p->descr, "<i8")) {
        reply_error(out, "TypeError", "positions must be integers, got dtype %s", p->descr);
        return NULL;
    }
    for (size_t i = 0; i < p->count; i++)
        if (npy_int(p, i) < 0) {
            reply_error(out, "ValueError", "positions must be >= 0, got %lld", npy_int(p, i));
            return NULL;
        }
    return p;
}

/* ------------------------------------------------------------------------------- contract functions */
static int rope_frequencies(const jval *args, const npy *arrays, size_t n, reply *out) {
    (void)arrays, (void)n;
    rope g;
    if (read_rope(args, &g, out)) return -1;
    double *w = malloc(sizeof(double) * (size_t)(g.d / 2));
    if (!w) return reply_error(out, "MemoryError", "rotary width %lld", g.d);
    for (long long j = 0; j < g.d / 2; j++) w[j] = omega(&g, j);
    long long shape[1] = {g.d / 2};
    jsonf(out, "[");
    int status = json_array_f8(out, w, 1, shape);
    jsonf(out, ", 1.0]");
    free(w);
    return status;
}

static int rope_cos_sin(const jval *args, const npy *arrays, size_t n, reply *out) {
    rope g;
    const npy *p;
    if (read_rope(args, &g, out) || !(p = read_positions(args, arrays, n, out))) return -1;
    size_t m = (size_t)g.d / 2;
    double *cos_table = malloc(sizeof(double) * p->count * (size_t)g.d);
    double *sin_table = malloc(sizeof(double) * p->count * (size_t)g.d);
    if (!cos_table || !sin_table) { free(cos_table); free(sin_table); return reply_error(out, "MemoryError", "tables"); }
    for (size_t t = 0; t < p->count; t++)
        for (size_t j = 0; j < m; j++) {
            double phi = (double)npy_int(p, t) * omega(&g, (long long)j), c = cos(phi), s = sin(phi);
            size_t at = t * (size_t)g.d, a = g.interleaved ? 2 * j : j, b = g.interleaved ? 2 * j + 1 : j + m;
            cos_table[at + a] = cos_table[at + b] = c;  /* half: [c_0 … c_{m-1}, c_0 …]; interleaved: c_0, c_0, … */
            sin_table[at + a] = sin_table[at + b] = s;
        }
    long long shape[PROTOCOL_MAX_DIMS + 1];
    memcpy(shape, p->shape, sizeof(long long) * (size_t)p->ndim);
    shape[p->ndim] = g.d;
    jsonf(out, "[");
    int status = json_array_f8(out, cos_table, p->ndim + 1, shape);
    jsonf(out, ", ");
    status = status ? status : json_array_f8(out, sin_table, p->ndim + 1, shape);
    jsonf(out, "]");
    free(cos_table);
    free(sin_table);
    return status;
}

static int apply_rope(const jval *args, const npy *arrays, size_t n, reply *out) {
    rope g;
    const npy *p, *x = arg_array(args, arrays, n, "x", out);
    if (!x || read_rope(args, &g, out) || !(p = read_positions(args, arrays, n, out))) return -1;
    if (strcmp(x->descr, "<f8") && strcmp(x->descr, "<f4"))
        return reply_error(out, "TypeError", "x must be a float array, got dtype %s", x->descr);
    if (x->ndim < 2 || x->shape[x->ndim - 1] != g.head_dim)
        return reply_error(out, "ValueError", "x must be (..., T, head_dim=%lld)", g.head_dim);
    long long T = x->shape[x->ndim - 2];
    /* positions (..., T): their leading axes are x's first ones (a (B, T) batch of x (B, H, T, D)), each equal or 1 */
    if (p->ndim < 1 || p->ndim > x->ndim - 1 || p->shape[p->ndim - 1] != T)
        return reply_error(out, "ValueError", "positions must be (..., T) with T = %lld and at most x's leading axes", T);
    for (int a = 0; a < p->ndim - 1; a++)
        if (p->shape[a] != 1 && p->shape[a] != x->shape[a])
            return reply_error(out, "ValueError", "positions axis %d (%lld) does not match x's (%lld)", a, p->shape[a],
                               x->shape[a]);
    double *y = malloc(sizeof(double) * (x->count ? x->count : 1));
    if (!y) return reply_error(out, "MemoryError", "the rotated x");
    size_t D = (size_t)g.head_dim, m = (size_t)g.d / 2, rows = x->count / D;
    for (size_t r = 0; r < rows; r++) {
        size_t t = r % (size_t)T, rest = r / (size_t)T, index[PROTOCOL_MAX_DIMS], pos_index = 0;
        for (int a = x->ndim - 3; a >= 0; a--) {  /* the row's index along each leading axis of x */
            index[a] = rest % (size_t)x->shape[a];
            rest /= (size_t)x->shape[a];
        }
        for (int a = 0; a < p->ndim - 1; a++)  /* the same row of positions (an axis of 1 broadcasts) */
            pos_index = pos_index * (size_t)p->shape[a] + (p->shape[a] == 1 ? 0 : index[a]);
        double position = (double)npy_int(p, pos_index * (size_t)T + t);
        const size_t at = r * D;
        for (size_t c = 0; c < D; c++) y[at + c] = npy_float(x, at + c);
        for (size_t j = 0; j < m; j++) {
            size_t a = g.interleaved ? 2 * j : j, b = g.interleaved ? 2 * j + 1 : j + m;
            double phi = position * omega(&g, (long long)j), u = y[at + a], v = y[at + b];
            y[at + a] = u * cos(phi) - v * sin(phi);
            y[at + b] = v * cos(phi) + u * sin(phi);
        }
    }
    int status = json_array_f8(out, y, x->ndim, x->shape);
    free(y);
    return status;
}

static const adapter_function FUNCTIONS[] = {
    {"apply_rope", apply_rope}, {"rope_cos_sin", rope_cos_sin}, {"rope_frequencies", rope_frequencies}, {NULL, NULL}};

int main(void) {
    adapter a = {INFO, FUNCTIONS, hello};
    return serve(&a);
}
