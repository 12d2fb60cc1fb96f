/* The window-level searches of engdiag/logs/windowscan.py in C, and the module (hot_scan is in _hotlines.c,
 * cues and proc_tags in _cues.c).
 * Each function must give exactly what its Python twin gives (tests/test_hot_scan.py). */
#include "_scan.h"


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

/* colour_at anywhere in the window (the bulk scanner asks cues(), which finds it in its walk, for whole windows). */
static PyObject *colour(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    const char *data = view.buf, *e = data + view.len;
    int found = 0;
    for (const char *p = data; !found && p < e && (p = memchr(p, '[', (size_t)(e - p))) != NULL; p++)
        found = colour_at(data, p, e);
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

/* cut_lists(data, lists, starts) -> (data without the byte ranges of `lists`, its line starts): lists are int64
 * (start, end) pairs, ascending, none holding a newline (hot_scan's pure token id lists); starts are data's
 * line starts (int64), each moved back by the bytes cut before it.  For the literal search (bulk.py). */
static PyObject *cut_lists(PyObject *self, PyObject *args) {
    Py_buffer view, spans, starts;
    if (!PyArg_ParseTuple(args, "y*y*y*", &view, &spans, &starts)) return NULL;
    const int64_t *at = spans.buf, *line = starts.buf;
    Py_ssize_t pairs = spans.len / 16, lines = starts.len / 8, size = view.len;
    PyObject *out = NULL, *moved = NULL, *result = NULL;
    for (Py_ssize_t i = 0; i < pairs; i++) {
        if (at[2 * i] < (i ? at[2 * i - 1] : 0) || at[2 * i] > at[2 * i + 1] || at[2 * i + 1] > view.len) {
            PyErr_SetString(PyExc_ValueError, "cut_lists: ranges out of order or out of the data");
            goto done;
        }
        size -= at[2 * i + 1] - at[2 * i];
    }
    out = PyBytes_FromStringAndSize(NULL, size);
    moved = PyBytes_FromStringAndSize(NULL, starts.len);
    if (!out || !moved) goto done;
    char *w = PyBytes_AS_STRING(out);
    const char *data = view.buf;
    int64_t from = 0;
    for (Py_ssize_t i = 0; i < pairs; i++) {
        memcpy(w, data + from, (size_t)(at[2 * i] - from));
        w += at[2 * i] - from;
        from = at[2 * i + 1];
    }
    memcpy(w, data + from, (size_t)(view.len - from));
    int64_t *to = (int64_t *)PyBytes_AS_STRING(moved), cut = 0;
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < lines; i++) {
        for (; k < pairs && at[2 * k + 1] <= line[i]; k++) cut += at[2 * k + 1] - at[2 * k];
        to[i] = line[i] - cut;
    }
    result = PyTuple_Pack(2, out, moved);
done:
    Py_XDECREF(out);
    Py_XDECREF(moved);
    PyBuffer_Release(&view);
    PyBuffer_Release(&spans);
    PyBuffer_Release(&starts);
    return result;
}

/* histogram(values) -> {value: how many}: the int32 values (hot_scan's token counts) counted, as
 * collections.Counter counts them (~60 ns a value in Python, a few thousand values a window). */
static PyObject *histogram(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    const int32_t *v = view.buf;
    Py_ssize_t n = view.len / 4;
    enum { SMALL = 4096 };
    Py_ssize_t *small = PyMem_Calloc(SMALL, sizeof(Py_ssize_t));
    PyObject *out = small ? PyDict_New() : PyErr_NoMemory();
    for (Py_ssize_t i = 0; out && i < n; i++) {
        if (v[i] >= 0 && v[i] < SMALL) {
            small[v[i]]++;
            continue;
        }
        PyObject *key = PyLong_FromLong(v[i]), *had = key ? PyDict_GetItemWithError(out, key) : NULL;
        PyObject *count = key && !PyErr_Occurred() ? PyLong_FromSsize_t((had ? PyLong_AsSsize_t(had) : 0) + 1) : NULL;
        if (!count || PyDict_SetItem(out, key, count) < 0) Py_CLEAR(out);
        Py_XDECREF(key);
        Py_XDECREF(count);
    }
    for (Py_ssize_t k = 0; out && k < SMALL; k++) {
        if (!small[k]) continue;
        PyObject *key = PyLong_FromSsize_t(k), *count = PyLong_FromSsize_t(small[k]);
        if (!key || !count || PyDict_SetItem(out, key, count) < 0) Py_CLEAR(out);
        Py_XDECREF(key);
        Py_XDECREF(count);
    }
    PyMem_Free(small);
    PyBuffer_Release(&view);
    return out;
}

static PyMethodDef methods[] = {
    {"hot_scan", hot_scan, METH_VARARGS, "Request lines of a window (and its line starts) that can be counted (see engdiag/logs/hotscan.py)."},
    {"proc_tags", proc_tags, METH_O, "Distinct process tags with a pid, as bulk._TAG.findall finds them."},
    {"cues", cues, METH_O, "(first and last line starts of the lines naming a process the tag search cannot see, or None;\n"
                           "does the window hold a colour code?)"},
    {"line_starts", line_starts, METH_O, "Offsets of the window's line starts (int64) and the longest line."},
    {"read_window", read_window, METH_VARARGS, "carry + bytes read, cut after the last newline read (see above)."},
    {"newlines", newlines, METH_VARARGS, "How many newlines buffer[:end] holds."},
    {"colour", colour, METH_O, "Does the window hold a colour code?"},
    {"strip_colour", strip_colour, METH_O, "The window without its colour codes."},
    {"cut_lists", cut_lists, METH_VARARGS, "The window without the given byte ranges, and its line starts."},
    {"histogram", histogram, METH_O, "How many times each int32 value occurs (as collections.Counter counts)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "engdiag.logs._scan", NULL, -1, methods};

PyMODINIT_FUNC PyInit__scan(void) { return PyModule_Create(&module); }
