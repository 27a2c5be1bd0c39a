/* The process protocol of spec_tests/adapters/process.py, served from C (docs/write-an-adapter.md, "Adapters in
 * other languages: the process protocol"): one JSON line per message, then the .npy arrays it names.
 *
 * protocol.c reads a request (a line of at most PROTOCOL_MAX_LINE bytes, arrays of at most PROTOCOL_MAX_BYTES
 * together), parses its JSON into a tree of jval, its arrays into npy records, answers __hello__ and calls the
 * adapter's function by name; the function fills a reply (a result as JSON text plus arrays, or an error of a
 * contract type). Reusable by any C adapter: serve(&adapter).
 */
#ifndef REFPOS_C_PROTOCOL_H
#define REFPOS_C_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

#define PROTOCOL_MAX_LINE (16u << 20)   /* the longest JSON line of a message */
#define PROTOCOL_MAX_BYTES (1u << 30)   /* the most bytes of arrays in one message */
#define PROTOCOL_MAX_DIMS 16

/* ------------------------------------------------------------------------------------------- JSON */
typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } jtype;

typedef struct jval {
    jtype type;
    int boolean;         /* J_BOOL */
    double num;          /* J_NUM */
    int is_int;          /* J_NUM written as an integer that int64 holds */
    long long integer;   /* its value */
    char *str;           /* J_STR, UTF-8 */
    size_t n;            /* J_ARR, J_OBJ: the number of items */
    struct jval *items;  /* J_ARR: the items; J_OBJ: the values */
    char **keys;         /* J_OBJ: the keys */
} jval;

const jval *jget(const jval *object, const char *key); /* NULL when absent (or object is not an object) */
int jnull(const jval *v);                               /* absent or null */

/* ------------------------------------------------------------------------------------------- .npy */
typedef struct {
    char descr[8];        /* "<f8", "<f4", "<i8", "|b1" (what the proxy sends) */
    int ndim;
    long long shape[PROTOCOL_MAX_DIMS];
    size_t count;         /* the product of the shape */
    const unsigned char *data;
} npy;

double npy_float(const npy *a, size_t i);    /* element i of a float array as double */
long long npy_int(const npy *a, size_t i);   /* element i of an <i8 array */

/* ------------------------------------------------------------------------------------------ reply */
typedef struct {
    char *text;            /* the result's JSON, grown by jsonf */
    size_t len, cap;
    char *arrays;          /* the .npy frames of the result, back to back */
    size_t arrays_len, arrays_cap;
    size_t sizes[64];
    int n_arrays;
    char error_type[32];   /* set by reply_error */
    char error[1024];
} reply;

void jsonf(reply *r, const char *format, ...);  /* append printf-formatted JSON text to the result */
void json_string(reply *r, const char *s);      /* append s as a JSON string */
void json_double(reply *r, double x);           /* append x (non-finite as {"$float": ...}) */
/* append a float64 array of the given shape as the next .npy frame and its {"$array": i} to the result; -1 when
 * the reply is out of memory (reply_error has been called) */
int json_array_f8(reply *r, const double *values, int ndim, const long long *shape);
int reply_error(reply *r, const char *type, const char *format, ...); /* returns -1 */

/* args: the request's "args" object (its arrays already resolved in `arrays`) */
typedef int (*contract_fn)(const jval *args, const npy *arrays, size_t n_arrays, reply *out);
/* the array an argument names ({"$array": i}); NULL with a TypeError in out otherwise */
const npy *arg_array(const jval *args, const npy *arrays, size_t n_arrays, const char *name, reply *out);

typedef struct {
    const char *name;
    contract_fn fn;
} adapter_function;

typedef struct {
    const char *info_json;                /* the adapter's INFO as a JSON object */
    const adapter_function *functions;    /* terminated by {NULL, NULL} */
    void (*hello)(const jval *args);      /* told the contract's lists (rope_keys, rope_types, ...) */
} adapter;

int serve(const adapter *a); /* answer requests on stdin until it ends; 0, or 2 when the stream breaks the protocol */

#endif
