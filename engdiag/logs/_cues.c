/* The searches for the processes of a window (engdiag/logs/windowscan.py's cues and proc_tags in C): the
 * process tags with a pid, and the lines that name a process where the tag search cannot see it (with, from the
 * same walk, whether the window holds a colour code).  Each must give exactly what its Python twin gives
 * (tests/test_hot_scan.py). */
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

/* _TAG at the '(' at s, content starting at c (at least `least` chars): the end of the match or NULL.  The
 * content runs to the first '(', ')' or newline (at most 250 bytes) and a match can only go on at one of its
 * spaces (" pid="), so the bytes are tested sixteen at a time for those four and pid_tail is tried at each
 * space in order, as the lazy regex tries each position (a "SamplingParams(...)" of fifty bytes was fifty). */
static const char *tag_at(const char *c, const char *e, int least, const char **pid_at, const char **ip,
                          const char **ip_end) {
    const char *last = e - c > 250 ? c + 250 : e; /* the last position tried (k <= 250) */
    const v16 open = SPLAT('('), close = SPLAT(')'), nl = SPLAT('\n'), space = SPLAT(' ');
    for (const char *block = c; block <= last; block += 16) {
        unsigned stops, spaces;
        if (block + 16 <= e) {
            v16 x;
            memcpy(&x, block, 16);
            stops = bitmask((v16)((x == open) | (x == close) | (x == nl)));
            spaces = bitmask((v16)(x == space));
        } else {
            stops = spaces = 0;
            for (int i = 0; block + i < e; i++) {
                stops |= (unsigned)(block[i] == '(' || block[i] == ')' || block[i] == '\n') << i;
                spaces |= (unsigned)(block[i] == ' ') << i;
            }
        }
        unsigned before = stops ? (stops & -stops) - 1 : 0xffffu; /* the bytes before the first stop */
        for (unsigned m = spaces & before; m; m &= m - 1) {
            const char *q = block + __builtin_ctz(m);
            if (q > last) return NULL;
            if (q - c < least) continue;
            const char *end = pid_tail(q, e, ip, ip_end);
            if (end) {
                *pid_at = q + 5;
                return end;
            }
        }
        if (stops) return NULL;
    }
    return NULL;
}

/* proc_tags(window) -> {(whole tag, name, pid, ip)}: _TAG.findall's distinct matches (memchr finds each '(': a
 * walk sixteen bytes at a time, as cues', is slower here, where a '(' comes once or twice a line). */
PyObject *proc_tags(PyObject *self, PyObject *arg) {
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

/* The cue at p, whose byte is '[', 'A' or '(': "[rank…]:", "[Stage-", a bare "APIServer" / "ApiServer", a role tag;
 * at a '[', also a colour code (*colour, once found, is not asked again; data: the window's start). */
static void cue_at(const char *data, const char *p, const char *e, Span *span, RoleTags *tags, int *colour) {
    if (*p == '[') {
        if (!*colour) *colour = colour_at(data, p, e);
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
 * (and a pass per needle) cost more than the search; colour() was one more such pass over the '['. */
static void cue_walk(const char *data, const char *e, Span *span, RoleTags *tags, int *colour) {
    const v16 open = SPLAT('['), a = SPLAT('A'), paren = SPLAT('(');
    const char *p = data;
    for (; p + 16 <= e; p += 16) {
        v16 x;
        memcpy(&x, p, 16);
        for (unsigned mask = bitmask((v16)((x == open) | (x == a) | (x == paren))); mask; mask &= mask - 1)
            cue_at(data, p + __builtin_ctz(mask), e, span, tags, colour);
    }
    for (; p < e; p++)
        if (*p == '[' || *p == 'A' || *p == '(') cue_at(data, p, e, span, tags, colour);
}

/* The start of the line holding p. */
static const char *line_start(const char *data, const char *p) {
    while (p > data && p[-1] != '\n') p--;
    return p;
}

/* cues(window) -> (span, colour): span is (start of the first line with a cue, start of the last one), or None: the
 * lines that name a process where the tag search cannot see it (glog [rankN]:, NCCL, vllm-omni's [Stage-N], bare
 * role names; role tags without pid= are counted, not placed: they make the whole window the span); colour: does
 * the window hold a colour code (colour() in _scan.c)? */
PyObject *cues(PyObject *self, PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    const char *data = view.buf, *e = data + view.len;
    Span span = {NULL, NULL};
    RoleTags tags = {{0, 0}, {0, 0}, {data, data}, {NULL, NULL}};
    int colour = 0;
    cue_walk(data, e, &span, &tags, &colour);
    for (const char *p = find_at(data, e, " NCCL ", 6, 4); p; p = find_at(p + 1, e, " NCCL ", 6, 4)) widen(&span, p);
    bare_role_cues(data, e, &span);
    if (tags.count[0] != tags.count[1]) {
        widen(&span, data);
        widen(&span, e);
    }
    PyObject *result = span.first ? Py_BuildValue("((nn)O)", (Py_ssize_t)(line_start(data, span.first) - data),
                                                  (Py_ssize_t)(line_start(data, span.last) - data), colour ? Py_True : Py_False)
                                  : Py_BuildValue("(OO)", Py_None, colour ? Py_True : Py_False);
    PyBuffer_Release(&view);
    return result;
}

