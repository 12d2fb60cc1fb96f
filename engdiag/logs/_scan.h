/* Helpers shared by the two halves of the C scanner (_hotlines.c, _scan.c). */
#ifndef ENGDIAG_SCAN_H
#define ENGDIAG_SCAN_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

static inline int is_digit(char c) { return c >= '0' && c <= '9'; }
/* [A-Za-z0-9_.-] by table (a request id is read byte by byte on every request line) */
static const unsigned char IDCHARS[256] = {['A' ... 'Z'] = 1, ['a' ... 'z'] = 1, ['0' ... '9'] = 1, ['_'] = 1, ['.'] = 1, ['-'] = 1};
static inline int is_idchar(char c) { return IDCHARS[(unsigned char)c]; }


static inline int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

static inline const char *level(const char *p, const char *e) {
    static const char *names[] = {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"};
    for (int i = 0; i < 5; i++) {
        size_t n = strlen(names[i]);
        if ((size_t)(e - p) >= n && memcmp(p, names[i], n) == 0) return p + n;
    }
    return NULL;
}


/* Does a colour code (\x1b\[[0-9;]*[A-Za-z] | \^\[\[[0-9;]*m | \[[0-9;]*[0-9]m, the codes lines.py strips) hold the
 * '[' at p (data: the window's start)?  Asked at every '[' of a window, it says whether the window holds one. */
static inline int colour_at(const char *data, const char *p, const char *e) {
    const char *r = p + 1;
    while (r < e && (is_digit(*r) || *r == ';')) r++;
    if (r < e && *r == 'm' && r > p + 1 && is_digit(r[-1])) return 1;
    if (p > data && p[-1] == '\x1b' && r < e && ((*r >= 'A' && *r <= 'Z') || (*r >= 'a' && *r <= 'z'))) return 1;
    return p - data >= 2 && p[-1] == '[' && p[-2] == '^' && r < e && *r == 'm'; /* "^[[" then [0-9;]* m */
}


/* memmem for short needles found thousands of times a window: memchr on one telling byte of the needle
 * (k: one rare in logs), then memcmp.  glibc's memmem pays a set-up per call. */
static inline const char *find_at(const char *p, const char *e, const char *needle, size_t n, size_t k) {
    if (p >= e || (size_t)(e - p) < n) return NULL;
    const char *last = e - n;
    for (const char *q = p + k; q <= last + k;) {
        q = memchr(q, needle[k], (size_t)(last + k + 1 - q));
        if (!q) return NULL;
        if (memcmp(q - k, needle, n) == 0) return q - k;
        q++;
    }
    return NULL;
}

/* find_at with the first upper-case letter or punctuation of the needle as the telling byte. */
static inline const char *find(const char *p, const char *e, const char *needle, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if ((needle[i] >= 'A' && needle[i] <= 'Z') || needle[i] == '_' || needle[i] == '[') {
            k = i;
            break;
        }
    return find_at(p, e, needle, n, k);
}


/* Sixteen bytes as one value of the compiler's vector extension (gcc, clang: SSE2 / NEON where present). */
typedef unsigned char v16 __attribute__((vector_size(16)));
#define SPLAT(c) ((v16){c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c})

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* One bit per byte of a comparison's result (bit i: byte i is 0xff): SSE2's movemask, else byte by byte. */
static inline unsigned bitmask(v16 hit) {
#if defined(__SSE2__)
    return (unsigned)_mm_movemask_epi8((__m128i)hit);
#else
    unsigned mask = 0;
    for (int i = 0; i < 16; i++) mask |= (unsigned)(hit[i] & 1) << i;
    return mask;
#endif
}

typedef struct {
    char *data;
    Py_ssize_t len, cap, item;
} Buf;

static inline int push(Buf *b, const void *value) {
    if (b->len + b->item > b->cap) {
        Py_ssize_t cap = b->cap ? b->cap * 2 : 4096;
        char *grown = PyMem_Realloc(b->data, (size_t)cap);
        if (!grown) return -1;
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, value, (size_t)b->item);
    b->len += b->item;
    return 0;
}


/* A request line's header (_header.c), as hot_scan reads it. */
typedef struct {
    const char *name, *name_end; /* process tag name (NULL: none) */
    const char *pid, *pid_end;
    const char *level, *level_end;
    const char *file, *file_end; /* "file:N" */
    const char *msg;            /* first byte of the message */
    int month;
    int access;                 /* 1: "LEVEL:" + whitespace (uvicorn) instead of a vLLM header */
} Header;

__attribute__((visibility("hidden"))) int header(const char *p, const char *e, Header *h);
PyObject *hot_scan(PyObject *self, PyObject *args);
PyObject *cues(PyObject *self, PyObject *arg);
PyObject *proc_tags(PyObject *self, PyObject *arg);

#endif
