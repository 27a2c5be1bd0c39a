/* The process protocol, served from C: framing, a small JSON reader and writer, .npy frames (protocol.h). */
#include "protocol.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64

/* ------------------------------------------------------------------------------------- JSON reader */
typedef struct {
    const char *s, *end;
    int depth;
    const char *error;
} parser;

static void skip_space(parser *p) {
    while (p->s < p->end && (*p->s == ' ' || *p->s == '\t' || *p->s == '\r' || *p->s == '\n')) p->s++;
}

static void jfree(jval *v) {
    if (v->type == J_STR) free(v->str);
    if (v->type == J_ARR || v->type == J_OBJ) {
        for (size_t i = 0; i < v->n; i++) {
            jfree(&v->items[i]);
            if (v->type == J_OBJ) free(v->keys[i]);
        }
        free(v->items);
        free(v->keys);
    }
    v->type = J_NULL;
}

static int hex4(parser *p, unsigned *out) {
    if (p->end - p->s < 4) return 0;
    *out = 0;
    for (int i = 0; i < 4; i++) {
        char c = *p->s++;
        *out <<= 4;
        if (c >= '0' && c <= '9') *out |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') *out |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') *out |= (unsigned)(c - 'A' + 10);
        else return 0;
    }
    return 1;
}

static char *parse_string(parser *p) { /* after the opening quote; UTF-8 out, \uXXXX (and pairs) decoded */
    size_t cap = 16, len = 0;
    char *out = malloc(cap);
    while (out && p->s < p->end && *p->s != '"') {
        unsigned code = (unsigned char)*p->s++;
        if (code == '\\') {
            if (p->s >= p->end) break;
            char e = *p->s++;
            const char *simple = strchr("\"\\/bfnrt", e);
            if (e == 'u') {
                if (!hex4(p, &code)) break;
                if (code >= 0xD800 && code < 0xDC00) { /* a surrogate pair */
                    unsigned low;
                    if (p->end - p->s < 6 || p->s[0] != '\\' || p->s[1] != 'u') break;
                    p->s += 2;
                    if (!hex4(p, &low) || low < 0xDC00 || low > 0xDFFF) break;
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
                }
                if (code == 0) break; /* a NUL would end the C string early */
            } else if (simple && e) {
                code = (unsigned char)"\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
            } else {
                break;
            }
            char utf8[4];
            int n = code < 0x80 ? 1 : code < 0x800 ? 2 : code < 0x10000 ? 3 : 4;
            if (n == 1) utf8[0] = (char)code;
            else if (n == 2) { utf8[0] = (char)(0xC0 | code >> 6); utf8[1] = (char)(0x80 | (code & 0x3F)); }
            else if (n == 3) { utf8[0] = (char)(0xE0 | code >> 12); utf8[1] = (char)(0x80 | ((code >> 6) & 0x3F));
                               utf8[2] = (char)(0x80 | (code & 0x3F)); }
            else { utf8[0] = (char)(0xF0 | code >> 18); utf8[1] = (char)(0x80 | ((code >> 12) & 0x3F));
                   utf8[2] = (char)(0x80 | ((code >> 6) & 0x3F)); utf8[3] = (char)(0x80 | (code & 0x3F)); }
            if (len + 4 >= cap) { char *grown = realloc(out, cap *= 2); if (!grown) { free(out); return NULL; } out = grown; }
            memcpy(out + len, utf8, (size_t)n);
            len += (size_t)n;
            continue;
        }
        if (code < 0x20 || code == 0) break; /* a raw control character is not JSON */
        if (len + 4 >= cap) { char *grown = realloc(out, cap *= 2); if (!grown) { free(out); return NULL; } out = grown; }
        out[len++] = (char)code;
    }
    if (!out || p->s >= p->end || *p->s != '"') { free(out); p->error = "a malformed string"; return NULL; }
    p->s++;
    out[len] = 0;
    return out;
}

static int parse_value(parser *p, jval *v);

static int parse_items(parser *p, jval *v, char close, int object) {
    size_t cap = 0;
    skip_space(p);
    if (p->s < p->end && *p->s == close) { p->s++; return 1; }
    for (;;) {
        if (v->n == cap) {
            cap = cap ? 2 * cap : 4;
            jval *items = realloc(v->items, cap * sizeof *items);
            char **keys = object ? realloc(v->keys, cap * sizeof *keys) : NULL;
            if (items) v->items = items;
            if (keys) v->keys = keys;
            if (!items || (object && !keys)) { p->error = "out of memory"; return 0; }
        }
        memset(&v->items[v->n], 0, sizeof v->items[v->n]);
        if (object) {
            skip_space(p);
            if (p->s >= p->end || *p->s != '"') { p->error = "a key that is not a string"; return 0; }
            p->s++;
            if (!(v->keys[v->n] = parse_string(p))) return 0;
            skip_space(p);
            if (p->s >= p->end || *p->s++ != ':') { free(v->keys[v->n]); p->error = "no ':' after a key"; return 0; }
        }
        if (!parse_value(p, &v->items[v->n])) { if (object) free(v->keys[v->n]); return 0; }
        v->n++;
        skip_space(p);
        if (p->s < p->end && *p->s == ',') { p->s++; continue; }
        if (p->s < p->end && *p->s == close) { p->s++; return 1; }
        p->error = "a list or object not closed";
        return 0;
    }
}

static int parse_value(parser *p, jval *v) {
    memset(v, 0, sizeof *v);
    skip_space(p);
    if (p->s >= p->end) { p->error = "the line ended inside a value"; return 0; }
    if (++p->depth > MAX_DEPTH) { p->error = "nested too deep"; return 0; }
    int ok = 1;
    char c = *p->s;
    if (c == '{' || c == '[') {
        p->s++;
        v->type = c == '{' ? J_OBJ : J_ARR;
        ok = parse_items(p, v, c == '{' ? '}' : ']', c == '{');
    } else if (c == '"') {
        p->s++;
        v->type = J_STR;
        ok = (v->str = parse_string(p)) != NULL;
    } else if (p->end - p->s >= 4 && !strncmp(p->s, "null", 4)) {
        p->s += 4;
    } else if (p->end - p->s >= 4 && !strncmp(p->s, "true", 4)) {
        p->s += 4; v->type = J_BOOL; v->boolean = 1;
    } else if (p->end - p->s >= 5 && !strncmp(p->s, "false", 5)) {
        p->s += 5; v->type = J_BOOL;
    } else {
        char token[64];
        size_t n = strspn(p->s, "+-0123456789.eE");
        if (n == 0 || n >= sizeof token || p->s + n > p->end) { p->error = "an unexpected character"; return 0; }
        memcpy(token, p->s, n);
        token[n] = 0;
        p->s += n;
        v->type = J_NUM;
        char *stop;
        v->num = strtod(token, &stop);
        ok = *stop == 0;
        if (ok && !strpbrk(token, ".eE")) {
            errno = 0;
            v->integer = strtoll(token, &stop, 10);
            v->is_int = errno == 0 && *stop == 0;
        }
        if (!ok) p->error = "a malformed number";
    }
    p->depth--;
    if (!ok) jfree(v);
    return ok;
}

const jval *jget(const jval *object, const char *key) {
    if (!object || object->type != J_OBJ) return NULL;
    for (size_t i = 0; i < object->n; i++)
        if (!strcmp(object->keys[i], key)) return &object->items[i];
    return NULL;
}

int jnull(const jval *v) { return !v || v->type == J_NULL; }

/* -------------------------------------------------------------------------------------------- .npy */
double npy_float(const npy *a, size_t i) {
    if (!strcmp(a->descr, "<f4")) { float f; memcpy(&f, a->data + 4 * i, 4); return f; }
    double d;
    memcpy(&d, a->data + 8 * i, 8);
    return d;
}

long long npy_int(const npy *a, size_t i) {
    int64_t v;
    memcpy(&v, a->data + 8 * i, 8);
    return (long long)v;
}

/* one .npy frame of `size` bytes (version 1.0, little-endian data: this example assumes a little-endian host) */
static const char *parse_npy(const unsigned char *data, size_t size, npy *a) {
    memset(a, 0, sizeof *a);
    if (size < 10 || memcmp(data, "\x93NUMPY\x01\x00", 8)) return "not an .npy frame of version 1.0";
    size_t header_len = (size_t)data[8] | (size_t)data[9] << 8;
    if (10 + header_len > size) return "an .npy header longer than its frame";
    char header[65536 + 1];
    memcpy(header, data + 10, header_len);
    header[header_len] = 0;
    const char *descr = strstr(header, "'descr': '"), *shape = strstr(header, "'shape': (");
    if (!descr || !shape || !strstr(header, "'fortran_order': False")) return "an .npy header without descr or shape";
    descr += 10;
    size_t n = strcspn(descr, "'");
    if (n >= sizeof a->descr) return "an .npy dtype this adapter does not read";
    memcpy(a->descr, descr, n);
    size_t item = !strcmp(a->descr, "<f8") || !strcmp(a->descr, "<i8") ? 8 : !strcmp(a->descr, "<f4") ? 4
                : !strcmp(a->descr, "|b1") ? 1 : 0;
    if (!item) return "an .npy dtype this adapter does not read";
    a->count = 1;
    for (const char *s = shape + 10; *s && *s != ')';) {
        char *stop;
        errno = 0;
        long long dim = strtoll(s, &stop, 10);
        if (stop == s || errno || dim < 0 || a->ndim == PROTOCOL_MAX_DIMS) return "an .npy shape this adapter refuses";
        if (dim && a->count > SIZE_MAX / 8 / (size_t)dim) return "an .npy shape whose size overflows";
        a->shape[a->ndim++] = dim;
        a->count *= (size_t)dim;
        s = stop + strspn(stop, ", ");
    }
    if (a->count * item != size - 10 - header_len) return "an .npy frame whose bytes do not match its shape";
    a->data = data + 10 + header_len;
    return NULL;
}

/* --------------------------------------------------------------------------------------------- reply */
static void grow(char **buf, size_t *cap, size_t need) {
    if (need <= *cap) return;
    size_t cap2 = *cap ? *cap : 256;
    while (cap2 < need) cap2 *= 2;
    char *grown = realloc(*buf, cap2);
    if (!grown) { fputs("c adapter: out of memory\n", stderr); abort(); }
    *buf = grown;
    *cap = cap2;
}

void jsonf(reply *r, const char *format, ...) {
    va_list args;
    va_start(args, format);
    int n = vsnprintf(NULL, 0, format, args);
    va_end(args);
    grow(&r->text, &r->cap, r->len + (size_t)n + 1);
    va_start(args, format);
    vsnprintf(r->text + r->len, (size_t)n + 1, format, args);
    va_end(args);
    r->len += (size_t)n;
}

void json_string(reply *r, const char *s) {
    jsonf(r, "\"");
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') jsonf(r, "\\%c", c);
        else if (c < 0x20) jsonf(r, "\\u%04x", c);
        else jsonf(r, "%c", c);
    }
    jsonf(r, "\"");
}

void json_double(reply *r, double x) {
    if (isnan(x)) jsonf(r, "{\"$float\": \"nan\"}");
    else if (isinf(x)) jsonf(r, "{\"$float\": \"%s\"}", x > 0 ? "inf" : "-inf");
    else jsonf(r, "%.17g", x);
}

int json_array_f8(reply *r, const double *values, int ndim, const long long *shape) {
    char header[512];
    int n = snprintf(header, sizeof header, "{'descr': '<f8', 'fortran_order': False, 'shape': (");
    size_t count = 1;
    for (int i = 0; i < ndim; i++) {
        n += snprintf(header + n, sizeof header - (size_t)n, "%lld,%s", shape[i], i + 1 < ndim ? " " : "");
        count *= (size_t)shape[i];
    }
    n += snprintf(header + n, sizeof header - (size_t)n, "), }");
    while ((10 + n + 1) % 64) header[n++] = ' ';
    header[n++] = '\n';
    if (r->n_arrays == 64) return reply_error(r, "ValueError", "a result of more than 64 arrays");
    size_t size = 10 + (size_t)n + 8 * count;
    grow(&r->arrays, &r->arrays_cap, r->arrays_len + size);
    char *at = r->arrays + r->arrays_len;
    memcpy(at, "\x93NUMPY\x01\x00", 8);
    at[8] = (char)(n & 0xFF);
    at[9] = (char)(n >> 8);
    memcpy(at + 10, header, (size_t)n);
    memcpy(at + 10 + n, values, 8 * count);
    r->arrays_len += size;
    r->sizes[r->n_arrays] = size;
    jsonf(r, "{\"$array\": %d}", r->n_arrays++);
    return 0;
}

int reply_error(reply *r, const char *type, const char *format, ...) {
    snprintf(r->error_type, sizeof r->error_type, "%s", type);
    va_list args;
    va_start(args, format);
    vsnprintf(r->error, sizeof r->error, format, args);
    va_end(args);
    return -1;
}

const npy *arg_array(const jval *args, const npy *arrays, size_t n_arrays, const char *name, reply *out) {
    const jval *ref = jget(jget(args, name), "$array");
    if (!ref || !ref->is_int || ref->integer < 0 || (size_t)ref->integer >= n_arrays) {
        reply_error(out, "TypeError", "%s must be an array", name);
        return NULL;
    }
    return &arrays[ref->integer];
}

/* ------------------------------------------------------------------------------------------ framing */
static void send(const reply *r, int error) {
    reply line = {0};
    if (error) {
        jsonf(&line, "{\"error\": {\"type\": ");
        json_string(&line, r->error_type);
        jsonf(&line, ", \"message\": ");
        json_string(&line, r->error);
        jsonf(&line, "}, \"arrays\": []}\n");
    } else {
        jsonf(&line, "{\"result\": %s, \"arrays\": [", r->text ? r->text : "null");
        for (int i = 0; i < r->n_arrays; i++) jsonf(&line, "%s%zu", i ? ", " : "", r->sizes[i]);
        jsonf(&line, "]}\n");
    }
    fwrite(line.text, 1, line.len, stdout);
    if (!error && r->arrays_len) fwrite(r->arrays, 1, r->arrays_len, stdout);
    fflush(stdout);
    free(line.text);
}

/* the next line of stdin, at most PROTOCOL_MAX_LINE bytes; NULL at the end (or *broken set) */
static char *read_line(size_t *len, int *broken) {
    size_t cap = 4096;
    char *line = malloc(cap);
    *len = 0;
    int c;
    while (line && (c = getchar()) != EOF) {
        if (c == '\n') { line[*len] = 0; return line; }
        if (*len + 1 >= cap) {
            if (cap > PROTOCOL_MAX_LINE) { *broken = 1; break; }
            char *grown = realloc(line, cap *= 2);
            if (!grown) { *broken = 1; break; }
            line = grown;
        }
        line[(*len)++] = (char)c;
    }
    if (*len) *broken = 1; /* the stream ended inside a line */
    free(line);
    return NULL;
}

int serve(const adapter *a) {
    int greeted = 0;
    for (;;) {
        size_t len;
        int broken = 0;
        char *line = read_line(&len, &broken);
        if (!line) {
            if (broken) fputs("c adapter: the request stream broke the protocol (a line too long or cut)\n", stderr);
            return broken ? 2 : 0;
        }
        parser p = {line, line + len, 0, NULL};
        jval message;
        if (!parse_value(&p, &message) || message.type != J_OBJ) {
            fprintf(stderr, "c adapter: a request that is not a JSON object (%s)\n", p.error ? p.error : "");
            free(line);
            return 2;
        }
        free(line);
        const jval *sizes = jget(&message, "arrays");
        size_t n_arrays = sizes && sizes->type == J_ARR ? sizes->n : 0, total = 0;
        npy arrays[64];
        unsigned char *blob = NULL;
        const char *problem = n_arrays > 64 ? "more than 64 arrays" : NULL;
        for (size_t i = 0; !problem && i < n_arrays; i++) {
            const jval *s = &sizes->items[i];
            if (!s->is_int || s->integer < 0 || (unsigned long long)s->integer > PROTOCOL_MAX_BYTES - total)
                problem = "an array size outside [0, 1 GiB]";
            else total += (size_t)s->integer;
        }
        if (!problem && total && !(blob = malloc(total))) problem = "out of memory for the arrays";
        if (!problem && fread(blob, 1, total, stdin) != total) problem = "the stream ended inside an array";
        for (size_t i = 0, at = 0; !problem && i < n_arrays; at += (size_t)sizes->items[i++].integer)
            problem = parse_npy(blob + at, (size_t)sizes->items[i].integer, &arrays[i]);
        if (problem) {
            fprintf(stderr, "c adapter: %s\n", problem);
            free(blob);
            jfree(&message);
            return 2;
        }
        const jval *call = jget(&message, "call"), *args = jget(&message, "args");
        reply r = {0};
        int status = 0;
        if (!call || call->type != J_STR) {
            status = reply_error(&r, "ProtocolError", "a request without a call name");
        } else if (!strcmp(call->str, "__hello__")) {
            if (a->hello) a->hello(args);
            greeted = 1;
            jsonf(&r, "{\"protocol\": 1, \"info\": %s, \"functions\": [", a->info_json);
            for (const adapter_function *f = a->functions; f->name; f++)
                jsonf(&r, "%s\"%s\"", f == a->functions ? "" : ", ", f->name);
            jsonf(&r, "]}");
        } else if (!greeted) {
            status = reply_error(&r, "ProtocolError", "%s came before any __hello__ request", call->str);
        } else {
            const adapter_function *f = a->functions;
            while (f->name && strcmp(f->name, call->str)) f++;
            status = f->name ? f->fn(args, arrays, n_arrays, &r)
                             : reply_error(&r, "NotImplementedError", "the C adapter does not provide %s", call->str);
        }
        send(&r, status != 0);
        free(r.text);
        free(r.arrays);
        free(blob);
        jfree(&message);
    }
}
