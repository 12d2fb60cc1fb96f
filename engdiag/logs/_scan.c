/* The window-level searches of engdiag/logs/windowscan.py in C, and the module (hot_scan is in _hotlines.c).
 * Each function must give exactly what its Python twin gives (tests/test_hot_scan.py). */
#include "_scan.h"


/* After the lazy content of a tag, at q: " pid=\d+(?:, ip=([^)\s]*))?\)"; the end after ')' or NULL. */
static const char *pid_tail(const char *q, const char *e, const char **ip, const char **ip_end) {
    if (e - q < 7 || q[0] != ' ' || q[1] != 'p' || memcmp(q, " pid=", 5) != 0 || !is_digit(q[5])) return NULL;
    q += 5;
    while (q < e && is_digit(*q)) q++;
    *ip = *ip_end = NULL;
    if (q < e && *q == ')') return q + 1;
    if ((size_t)(e - q) >= 5 && memcmp(q, ", ip=", 5) == 0) {
        const char *r = q + 5;
        while (r < e && *r != ')' && !is_space(*r)) r++;
        if (r < e && *r == ')') {
            *ip = q + 5;
            *ip_end = r;
            return r + 1;
        }
    }
    return NULL;
}

/* _TAG at the '(' at s, content starting at c (at least `least` chars): the end of the match or NULL. */
static const char *tag_at(const char *c, const char *e, int least, const char **pid_at, const char **ip,
                          const char **ip_end) {
    for (int k = 0; k <= 250 && c + k <= e; k++) {
        if (k >= least) {
            const char *end = pid_tail(c + k, e, ip, ip_end);
            if (end) {
                *pid_at = c + k + 5;
                return end;
            }
        }
        if (c + k >= e) break;
        char ch = c[k];
        if (ch == '(' || ch == ')' || ch == '\n') break;
    }
    return NULL;
}

static PyObject *proc_tags(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    const char *p = view.buf, *e = p + view.len;
    PyObject *found = PySet_New(NULL);
    const char *last = NULL;
    Py_ssize_t last_len = 0;
    while (found && p < e) {
        const char *s = memchr(p, '(', (size_t)(e - p));
        if (!s) break;
        if (last && e - s >= last_len && memcmp(s, last, (size_t)last_len) == 0) {
            p = s + last_len; /* the same bytes as the last tag found: the same match */
            continue;
        }
        const char *pid_at, *ip, *ip_end;
        const char *end = tag_at(s + 1, e, 1, &pid_at, &ip, &ip_end);
        if (!end) {
            p = s + 1;
            continue;
        }
        if (!(last && end - s == last_len && memcmp(s, last, (size_t)last_len) == 0)) {
            const char *pid_end = pid_at;
            while (is_digit(*pid_end)) pid_end++;
            PyObject *item = Py_BuildValue("(y#y#y#y#)", s, (Py_ssize_t)(end - s), s + 1, (Py_ssize_t)(pid_at - 5 - s - 1),
                                           pid_at, (Py_ssize_t)(pid_end - pid_at), ip ? ip : "",
                                           (Py_ssize_t)(ip ? ip_end - ip : 0));
            if (!item || PySet_Add(found, item) < 0) {
                Py_XDECREF(item);
                Py_CLEAR(found);
                break;
            }
            Py_DECREF(item);
            last = s;
            last_len = end - s;
        }
        p = end;
    }
    PyBuffer_Release(&view);
    return found;
}

static const char *ROLES[] = {"EngineCore", "APIServer", "ApiServer", "VllmWorker", "Worker", "RayWorker"};

/* A role name at p (n bytes) followed by \S* ' ' LEVEL ' ', and not by " pid=" (a tag)? */
static int bare_role_at(const char *p, size_t n, const char *e) {
    const char *q = p + n;
    if (q + 5 < e && q[0] == ' ' && q[1] == 'p' && q[2] == 'i' && q[3] == 'd' && q[4] == '=') return 0;
    while (q < e && !is_space(*q)) q++;
    if (q < e && *q == ' ') {
        const char *l = level(q + 1, e);
        if (l && l < e && *l == ' ') return 1;
    }
    return 0;
}

/* The lines holding the window's cues: the first and the last hit seen so far. */
typedef struct {
    const char *first, *last;
} Span;

static void widen(Span *span, const char *hit) {
    if (!span->first || hit < span->first) span->first = hit;
    if (!span->last || hit > span->last) span->last = hit;
}

/* "EngineCore" and "Worker" followed by \S* ' ' LEVEL ' ' (and no " pid="): a process named without a tag.  Their
 * first bytes are rare in logs, so memchr finds them in few calls ("APIServer" is found in cue_walk). */
static void bare_role_cues(const char *data, const char *e, Span *span) {
    static const char *names[] = {"EngineCore", "Worker"};
    for (int i = 0; i < 2; i++) {
        size_t n = strlen(names[i]);
        for (const char *p = find(data, e, names[i], n); p; p = find(p + 1, e, names[i], n))
            if (bare_role_at(p, n, e)) widen(span, p);
    }
}

/* Length of the role name after '(' at s (0: none). */
static size_t role_after(const char *s, const char *e) {
    for (int i = 0; i < 6; i++) {
        size_t m = strlen(ROLES[i]);
        if ((size_t)(e - s - 1) >= m && memcmp(s + 1, ROLES[i], m) == 0) return m;
    }
    return 0;
}

/* As many role tags (\((role)[^()\n]{0,250}\)) as role tags with a pid?  Both findall counts in one walk
 * over the '(' of the window: each count keeps its own cursor (where its last match ended), so each sees
 * exactly the '(' its own pass would.  A '(' that is not followed by a role name matches neither and moves
 * neither cursor past a later '(', so only the '(' before a role's first letter need be shown. */
typedef struct {
    Py_ssize_t count[2], last_len[2];
    const char *cursor[2], *last[2];
} RoleTags;

static void role_tag_at(RoleTags *t, const char *s, const char *e) {
    int same = -1; /* pass 0's answer to "the same bytes as the last match", when pass 1's last match is the same */
    for (int pass = 0; pass < 2; pass++) {
        if (s < t->cursor[pass]) continue;
        int again = pass == 1 && same >= 0 && t->last[1] == t->last[0] && t->last_len[1] == t->last_len[0]
                        ? same
                        : t->last[pass] && e - s >= t->last_len[pass] && memcmp(s, t->last[pass], (size_t)t->last_len[pass]) == 0;
        if (pass == 0) same = again;
        if (again) {
            t->count[pass]++; /* the same bytes as the last match: the same match */
            t->cursor[pass] = s + t->last_len[pass];
            continue;
        }
        size_t n = role_after(s, e);
        const char *end = NULL;
        if (n && pass == 0) {
            const char *q = s + 1 + n;
            for (int k = 0; k <= 250 && q < e && *q != '(' && *q != ')' && *q != '\n'; k++) q++;
            if (q < e && *q == ')' && q - (s + 1 + n) <= 250) end = q + 1;
        } else if (n) {
            const char *pid_at, *ip, *ip_end;
            end = tag_at(s + 1 + n, e, 0, &pid_at, &ip, &ip_end);
        }
        if (end) {
            t->count[pass]++;
            t->last[pass] = s;
            t->last_len[pass] = end - s;
            t->cursor[pass] = end;
        } else t->cursor[pass] = s + 1;
    }
}

/* The cue at p, whose byte is '[', 'A' or '(': "[rank…]:", "[Stage-", a bare "APIServer" / "ApiServer", a role tag. */
static void cue_at(const char *p, const char *e, Span *span, RoleTags *tags) {
    if (*p == '[') {
        if (e - p >= 5 && p[1] == 'r' && memcmp(p, "[rank", 5) == 0) {
            const char *q = p + 5;
            while (q < e && *q != ']' && *q != '\n') q++;
            if (q + 1 < e && *q == ']' && q[1] == ':') widen(span, p);
        } else if (e - p >= 7 && p[1] == 'S' && memcmp(p, "[Stage-", 7) == 0)
            widen(span, p);
    } else if (*p == 'A') {
        if (e - p >= 9 && (memcmp(p, "APIServer", 9) == 0 || memcmp(p, "ApiServer", 9) == 0) && bare_role_at(p, 9, e))
            widen(span, p);
    } else if (p + 1 < e && (p[1] == 'E' || p[1] == 'A' || p[1] == 'V' || p[1] == 'W' || p[1] == 'R'))
        role_tag_at(tags, p, e);
}

/* Every '[', 'A' and '(' of the window in order, sixteen bytes tested at once and the hits of a block taken from
 * its bit mask: these bytes are in every line ("[file:N]", "(APIServer pid=N)"), where a memchr call per hit
 * (and a pass per needle) cost more than the search. */
static void cue_walk(const char *data, const char *e, Span *span, RoleTags *tags) {
    const v16 open = SPLAT('['), a = SPLAT('A'), paren = SPLAT('(');
    const char *p = data;
    for (; p + 16 <= e; p += 16) {
        v16 x;
        memcpy(&x, p, 16);
        for (unsigned mask = bitmask((v16)((x == open) | (x == a) | (x == paren))); mask; mask &= mask - 1)
            cue_at(p + __builtin_ctz(mask), e, span, tags);
    }
    for (; p < e; p++)
        if (*p == '[' || *p == 'A' || *p == '(') cue_at(p, e, span, tags);
}

/* The start of the line holding p. */
static const char *line_start(const char *data, const char *p) {
    while (p > data && p[-1] != '\n') p--;
    return p;
}

/* cue_span(window) -> (start of the first line with a cue, start of the last one), or None: the lines that name
 * a process where the tag search cannot see it (glog [rankN]:, NCCL, vllm-omni's [Stage-N], bare role names;
 * role tags without pid= are counted, not placed: they make the whole window the span). */
static PyObject *cue_span(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    const char *data = view.buf, *e = data + view.len;
    Span span = {NULL, NULL};
    RoleTags tags = {{0, 0}, {0, 0}, {data, data}, {NULL, NULL}};
    cue_walk(data, e, &span, &tags);
    for (const char *p = find_at(data, e, " NCCL ", 6, 4); p; p = find_at(p + 1, e, " NCCL ", 6, 4)) widen(&span, p);
    bare_role_cues(data, e, &span);
    if (tags.count[0] != tags.count[1]) {
        widen(&span, data);
        widen(&span, e);
    }
    PyObject *result = span.first ? Py_BuildValue("(nn)", (Py_ssize_t)(line_start(data, span.first) - data),
                                                  (Py_ssize_t)(line_start(data, span.last) - data))
                                  : Py_NewRef(Py_None);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *line_starts(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    const char *data = view.buf, *e = data + view.len;
    Buf out = {NULL, 0, 0, 8};
    int64_t at = 0, longest = 0;
    int failed = push(&out, &at) < 0;
    for (const char *p = data; !failed && (p = memchr(p, '\n', (size_t)(e - p))) != NULL; p++) {
        if (p - data - at > longest) longest = p - data - at;
        at = p + 1 - data;
        failed = push(&out, &at) < 0;
    }
    if (e - data - at > longest) longest = e - data - at;
    PyObject *result = failed ? PyErr_NoMemory() : Py_BuildValue("(y#L)", out.data, out.len, (long long)longest);
    PyMem_Free(out.data);
    PyBuffer_Release(&view);
    return result;
}

/* read_window(readinto, carry, size) -> (window or None, rest, got): the bulk scanner's windows with one
 * allocation and no copy but the carried partial line's, instead of read() + join + slice (three big objects a
 * window).  `carry` and then bytes from readinto (called until the object is full or it returns 0/None; at most
 * `size` bytes) go into one bytes object of `size` bytes (as long as the carry is under half of it), cut before
 * the last '\n' read: the window; rest: the bytes after that '\n'; got: bytes read.  No '\n' read: (None,
 * carry + what was read, got).  The object is cut by setting its length, not by realloc: a shrunk block would
 * keep glibc from reusing it for the next window (every window would be fresh pages, a page fault each 4 KiB). */
static PyObject *read_window(PyObject *self, PyObject *args) {
    PyObject *readinto;
    Py_buffer carry;
    Py_ssize_t size;
    if (!PyArg_ParseTuple(args, "Oy*n", &readinto, &carry, &size)) return NULL;
    Py_ssize_t head = carry.len, got = 0, room = size < 0 ? 0 : head < size / 2 ? size - head : size;
    PyObject *out = PyBytes_FromStringAndSize(NULL, head + room);
    if (out) memcpy(PyBytes_AS_STRING(out), carry.buf, (size_t)head);
    PyBuffer_Release(&carry);
    if (!out) return NULL;
    char *data = PyBytes_AS_STRING(out);
    while (got < room) {
        PyObject *view = PyMemoryView_FromMemory(data + head + got, room - got, PyBUF_WRITE);
        if (!view) goto fail;
        PyObject *n = PyObject_CallOneArg(readinto, view), *type, *value, *trace;
        PyErr_Fetch(&type, &value, &trace); /* a read error (a truncated .bz2) survives the release */
        PyObject *released = PyObject_CallMethod(view, "release", NULL);
        Py_DECREF(view);
        if (!released) {
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(trace);
            Py_XDECREF(n);
            goto fail;
        }
        Py_DECREF(released);
        PyErr_Restore(type, value, trace);
        if (!n) goto fail;
        Py_ssize_t k = n == Py_None ? 0 : PyLong_AsSsize_t(n);
        Py_DECREF(n);
        if (k < 0 && PyErr_Occurred()) goto fail;
        if (k <= 0) break;
        got += k < room - got ? k : room - got;
    }
    Py_ssize_t cut = head + got - 1;
    while (cut >= head && data[cut] != '\n') cut--;
    if (cut < head) {
        Py_SET_SIZE(out, head + got);
        data[head + got] = '\0';
        return Py_BuildValue("(ONn)", Py_None, out, got);
    }
    PyObject *rest = PyBytes_FromStringAndSize(data + cut + 1, head + got - cut - 1);
    if (!rest) goto fail;
    Py_SET_SIZE(out, cut);
    data[cut] = '\0';
    return Py_BuildValue("(NNn)", out, rest, got);
fail:
    Py_DECREF(out);
    return NULL;
}

/* newlines(buffer, end): the '\n' in buffer[:end].  A byte range's worker waits for this count (its first
 * line number) before it scans, so it runs over the mapped file, without the GIL, in blocks of 255 bytes whose
 * one-byte sums the compiler vectorises (bytes.count is one byte at a time). */
static PyObject *newlines(PyObject *self, PyObject *args) {
    Py_buffer view;
    Py_ssize_t end;
    if (!PyArg_ParseTuple(args, "y*n", &view, &end)) return NULL;
    const unsigned char *p = view.buf;
    size_t n = (size_t)(end < 0 ? 0 : end < view.len ? end : view.len), total = 0;
    Py_BEGIN_ALLOW_THREADS
    while (n) {
        size_t block = n < 255 * 64 ? n : 255 * 64;
        unsigned char sums[64] = {0};
        for (size_t i = 0; i + 64 <= block; i += 64)
            for (int k = 0; k < 64; k++) sums[k] += p[i + k] == '\n';
        for (int k = 0; k < 64; k++) total += sums[k];
        for (size_t i = block - block % 64; i < block; i++) total += p[i] == '\n';
        p += block;
        n -= block;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return PyLong_FromSize_t(total);
}

/* \x1b\[[0-9;]*[A-Za-z] | \^\[\[[0-9;]*m | \[[0-9;]*[0-9]m anywhere (the colour codes lines.py strips). */
static PyObject *colour(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    const char *data = view.buf, *e = data + view.len;
    int found = 0;
    for (const char *p = data; !found && p < e && (p = memchr(p, '[', (size_t)(e - p))) != NULL; p++) {
        const char *r = p + 1;
        while (r < e && (is_digit(*r) || *r == ';')) r++;
        if (r < e && *r == 'm' && r > p + 1 && is_digit(r[-1])) found = 1;
        else if (p > data && p[-1] == '\x1b' && r < e && ((*r >= 'A' && *r <= 'Z') || (*r >= 'a' && *r <= 'z'))) found = 1;
        else if (p - data >= 2 && p[-1] == '[' && p[-2] == '^') {
            /* "^[[" then [0-9;]* m: r already skipped the digits after this '[' */
            if (r < e && *r == 'm') found = 1;
        }
    }
    PyBuffer_Release(&view);
    return PyBool_FromLong(found);
}

/* The first ESC, '^' or '[' at or after p (e if none): sixteen bytes tested at once, the rare block that holds
 * one looked at byte by byte (a colour-coded log has two or three a line, the rest is plain text). */
static const char *next_colour_byte(const char *p, const char *e) {
    const v16 esc = SPLAT('\x1b'), caret = SPLAT('^'), open = SPLAT('[');
    for (; p + 16 <= e; p += 16) {
        v16 x;
        memcpy(&x, p, 16);
        v16 hit = (v16)((x == esc) | (x == caret) | (x == open));
        uint64_t lo, hi;
        memcpy(&lo, &hit, 8);
        memcpy(&hi, (const char *)&hit + 8, 8);
        if (lo | hi) break;
    }
    while (p < e && *p != '\x1b' && *p != '^' && *p != '[') p++;
    return p;
}

/* data with the colour codes of colour() removed, as re.sub of that alternation does it.  The result is
 * cut by setting its length, not by realloc (see read_window: a shrunk block is never reused). */
static PyObject *strip_colour(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    const char *data = view.buf, *e = data + view.len;
    PyObject *out = PyBytes_FromStringAndSize(NULL, view.len);
    if (!out) {
        PyBuffer_Release(&view);
        return NULL;
    }
    char *w = PyBytes_AS_STRING(out);
    const char *p = data;
    while (p < e) {
        const char *q = next_colour_byte(p, e);
        memcpy(w, p, (size_t)(q - p));
        w += q - p;
        if (q >= e) break;
        const char *r = NULL;
        if (*q == '\x1b' && q + 1 < e && q[1] == '[') {
            r = q + 2;
            while (r < e && (is_digit(*r) || *r == ';')) r++;
            r = (r < e && ((*r >= 'A' && *r <= 'Z') || (*r >= 'a' && *r <= 'z'))) ? r + 1 : NULL;
        } else if (*q == '^' && e - q >= 3 && q[1] == '[' && q[2] == '[') {
            r = q + 3;
            while (r < e && (is_digit(*r) || *r == ';')) r++;
            r = (r < e && *r == 'm') ? r + 1 : NULL;
        } else if (*q == '[') {
            r = q + 1;
            while (r < e && (is_digit(*r) || *r == ';')) r++;
            r = (r < e && *r == 'm' && r > q + 1 && is_digit(r[-1])) ? r + 1 : NULL;
        }
        if (r) p = r;
        else {
            *w++ = *q;
            p = q + 1;
        }
    }
    PyBuffer_Release(&view);
    if (w - PyBytes_AS_STRING(out) != Py_SIZE(out)) { /* never the empty bytes singleton: nothing was cut */
        Py_SET_SIZE(out, w - PyBytes_AS_STRING(out));
        *w = '\0';
    }
    return out;
}

static PyMethodDef methods[] = {
    {"hot_scan", hot_scan, METH_O, "Request lines of a window that can be counted (see engdiag/logs/hotscan.py)."},
    {"proc_tags", proc_tags, METH_O, "Distinct process tags with a pid, as bulk._TAG.findall finds them."},
    {"cue_span", cue_span, METH_O, "The first and last line starts of the lines naming a process the tag search cannot see."},
    {"line_starts", line_starts, METH_O, "Offsets of the window's line starts (int64) and the longest line."},
    {"read_window", read_window, METH_VARARGS, "carry + bytes read, cut after the last newline read (see above)."},
    {"newlines", newlines, METH_VARARGS, "How many newlines buffer[:end] holds."},
    {"colour", colour, METH_O, "Does the window hold a colour code?"},
    {"strip_colour", strip_colour, METH_O, "The window without its colour codes."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "engdiag.logs._scan", NULL, -1, methods};

PyMODINIT_FUNC PyInit__scan(void) { return PyModule_Create(&module); }
