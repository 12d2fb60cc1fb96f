/* The native hot path of the bulk scanner: find the request lines that come by the
 * thousand and say which of them can be counted instead of parsed.
 *
 * This is the C twin of engdiag/logs/hotscan.py (the pure-Python fallback); both
 * implement the same conservative grammar and must agree exactly
 * (tests/test_hot_scan.py).  A line is "ok" only when the line scanner would read it
 * as a one-piece vLLM record holding exactly one hot literal set, whose events are
 * known from the line alone, and whose successor cannot join it.  Anything else
 * that holds a hot literal is reported as "bad" and is read the full way.
 *
 * hot_scan(data, starts) -> (ok_index: bytes[int32], ok_kind: bytes[uint8], ok_tokens: bytes[int32],
 *                            bad: list[(index, literal bits)], months: int, lists: bytes[int64 start, end])
 * months: bits 1 and 12, set where an ok line is of January / December.
 * starts: the window's line starts (int64, as line_starts gives them), walked instead of a memchr per line.
 * kind 1 = "Received request" (+ prompt_token_ids), 2 = "Added request".
 * Literal bits: 1 "Received request", 2 "prompt_token_ids: ", 4 "Added request".
 */
#include "_scan.h"

#define REC "Received request"
#define PTI "prompt_token_ids: "
#define ADD "Added request"
#define REC_N (sizeof(REC) - 1)
#define PTI_N (sizeof(PTI) - 1)
#define ADD_N (sizeof(ADD) - 1)

/* The last header parsed: a line's successor check parses the next line, which is most often the next line
 * classified (request lines come in runs), so each header is parsed once. */
typedef struct {
    const char *s, *e;
    int ok;
    Header h;
} Parsed;

static int parsed(Parsed *last, const char *s, const char *e, Header *h) {
    if (last->s != s || last->e != e) {
        last->s = s;
        last->e = e;
        last->ok = header(s, e, &last->h);
    }
    *h = last->h;
    return last->ok;
}

static int same(const char *a, const char *ae, const char *b, const char *be) {
    return (ae - a) == (be - b) && (a == NULL || memcmp(a, b, (size_t)(ae - a)) == 0);
}

/* Does the line starting at s (ending at e) surely start a record that cannot join h's? */
static int safe_successor(Parsed *last, const char *s, const char *e, const Header *h, int cr) {
    Header n;
    if (cr || !parsed(last, s, e, &n)) return 0;
    if (n.access) return 1;
    if (!same(n.name, n.name_end, h->name, h->name_end) || !same(n.pid, n.pid_end, h->pid, h->pid_end) ||
        !same(n.level, n.level_end, h->level, h->level_end) || !same(n.file, n.file_end, h->file, h->file_end))
        return 1;
    return ((size_t)(e - n.msg) > REC_N && memcmp(n.msg, REC " ", REC_N + 1) == 0) ||
           ((size_t)(e - n.msg) > ADD_N && memcmp(n.msg, ADD " ", ADD_N + 1) == 0);
}

/* Sorted offsets of one thing in the window, walked once from the start. */
typedef struct {
    Buf at;
    Py_ssize_t next;
} Hits;

static const char *hit(Hits *h, Py_ssize_t i) { return ((const char **)h->at.data)[i]; }
static Py_ssize_t nhits(Hits *h) { return h->at.len / (Py_ssize_t)sizeof(char *); }

/* Skip hits before s; count those in [s, e) (leaves next at the first one in it); first one in *first. */
static int count_in(Hits *h, const char *s, const char *e, const char **first) {
    while (h->next < nhits(h) && hit(h, h->next) < s) h->next++;
    int n = 0;
    for (Py_ssize_t i = h->next; i < nhits(h) && hit(h, i) < e; i++) {
        if (!n && first) *first = hit(h, i);
        n++;
    }
    return n;
}

static int collect(Hits *h, const char *data, const char *e, const char *needle, size_t n, size_t k) {
    for (const char *p = find_at(data, e, needle, n, k); p; p = find_at(p + 1, e, needle, n, k))
        if (push(&h->at, &p) < 0) return -1;
    return 0;
}

/* "Received request" and "Added request" in one pass: both are found by the 'q' of "request" (index 11 / 8),
 * so each 'q' costs one memchr step, not two (two separate passes on the 'u' and the 'e' after it stopped
 * at every 'e' of the window). */
static int collect_requests(Hits *rec, Hits *add, const char *data, const char *e) {
    if (e - data < (Py_ssize_t)ADD_N) return 0;
    for (const char *p = data + 8; p < e && (p = memchr(p, 'q', (size_t)(e - p))) != NULL; p++) {
        if (p - data >= 11 && e - (p - 11) >= (Py_ssize_t)REC_N && memcmp(p - 11, REC, REC_N) == 0) {
            const char *at = p - 11;
            if (push(&rec->at, &at) < 0) return -1;
        } else if (e - (p - 8) >= (Py_ssize_t)ADD_N && memcmp(p - 8, ADD, ADD_N) == 0) {
            const char *at = p - 8;
            if (push(&add->at, &at) < 0) return -1;
        }
    }
    return 0;
}

enum { H_REC, H_PTI, H_ADD, H_N };

/* A colour code (\[[0-9;]*[0-9]m) or Ray's "[repeated " at the '[' at p (e: the line's end)? */
static int unclean_bracket(const char *p, const char *e) {
    const char *r = p + 1;
    while (r < e && (is_digit(*r) || *r == ';')) r++;
    return (r < e && *r == 'm' && r > p + 1 && is_digit(r[-1])) || ((size_t)(e - p) >= 10 && memcmp(p, "[repeated ", 10) == 0);
}

/* No byte or sequence that cleaning would act on in [p, e) (part of one line): CR, '|', ESC, colour codes,
 * "[repeated ", " NCCL " (found by its 'L').  Only the lines that hold a request literal are asked, so this is
 * a walk over each such line's message, sixteen bytes at a time, not a search over the window per cue (the '['
 * of every line's "[file:N]" made that a memchr call or two per line). */
static int clean_rest(const char *p, const char *e) {
    const v16 cr = SPLAT('\r'), bar = SPLAT('|'), esc = SPLAT('\x1b'), open = SPLAT('['), ell = SPLAT('L');
    const char *q = p;
    for (;;) {
        for (; q + 16 <= e; q += 16) {
            v16 x;
            memcpy(&x, q, 16);
            v16 hit = (v16)((x == cr) | (x == bar) | (x == esc) | (x == open) | (x == ell));
            uint64_t lo, hi;
            memcpy(&lo, &hit, 8);
            memcpy(&hi, (const char *)&hit + 8, 8);
            if (lo | hi) break;
        }
        const char *stop = q + 16 <= e ? q + 16 : e;
        for (; q < stop; q++) {
            char c = *q;
            if (c == '\r' || c == '|' || c == '\x1b') return 0;
            if (c == '[' && unclean_bracket(q, e)) return 0;
            if (c == 'L' && q - 4 >= p && q + 2 <= e && memcmp(q - 4, " NCCL ", 6) == 0) return 0;
        }
        if (q >= e) return 1;
    }
}

/* Is the byte at p one that ends a token id list's plain run, and does it fail the line?  (quotes: the list
 * may be inside a user string; the rest: what cleaning acts on, see clean_rest; lo: the message's start) */
static int list_fails(const char *lo, const char *p, const char *e) {
    char c = *p;
    return c == '\'' || c == '"' || c == '\r' || c == '|' || c == '\x1b' || (c == '[' && unclean_bracket(p, e)) ||
           (c == 'L' && p - 4 >= lo && p + 2 <= e && memcmp(p - 4, " NCCL ", 6) == 0);
}

/* The token id list opening at the '[' at q, to the line's end e: the size mask() gives it (commas + 1, 0 when
 * empty) when it is closed, starts with an id (after spaces), no quote is in it or after it (else
 * "prompt_token_ids: [" may be inside a user string) and nothing in [q, e) is what cleaning acts on (see
 * clean_rest; lo: where the message starts); else -1.  One walk, sixteen bytes at a time: inside the list a
 * block of digits, commas and spaces only has its commas counted (a vector comparison is 0xff in each equal
 * byte, so subtracting it counts; the byte counters are summed every 255 blocks, before they can wrap), after
 * it a block without a quote or cleaning cue is passed over; any other block is read byte by byte.  *pure_end:
 * the closing ']' when the list holds nothing but digits, commas and spaces (see engines.LISTS_CUT), else NULL. */
static int list_rest(const char *lo, const char *q, const char *e, const char **pure_end) {
    if (unclean_bracket(q, e)) return -1;
    const char *p = q + 1;
    while (p < e && *p == ' ') p++;
    if (p < e && *p != ']' && !is_digit(*p)) return -1;
    const v16 comma = SPLAT(','), space = SPLAT(' '), zero = SPLAT('0'), nine = SPLAT(9);
    unsigned int commas = 0;
    int closed = 0, odd = 0;
    while (!closed && p < e) {
        v16 counts = SPLAT(0);
        for (int k = 0; k < 255 && p + 16 <= e; k++, p += 16) {
            v16 x;
            memcpy(&x, p, 16);
            v16 commas_here = (v16)(x == comma);
            if (bitmask((v16)((v16)(x - zero) <= nine) | commas_here | (v16)(x == space)) != 0xffff) break;
            counts -= commas_here;
        }
        for (int i = 0; i < 16; i++) commas += counts[i];
        for (const char *stop = p + 16 <= e ? p + 16 : e; p < stop && !closed; p++) {
            if (*p == ',') commas++;
            else if (*p == ']') {
                closed = 1;
                *pure_end = odd ? NULL : p;
            } else if (list_fails(lo, p, e)) return -1;
            else odd |= *p != ' ' && !is_digit(*p);
        }
    }
    if (!closed) return -1;
    const v16 quote = SPLAT('\''), dquote = SPLAT('"'), cr = SPLAT('\r'), bar = SPLAT('|'), esc = SPLAT('\x1b'),
              open = SPLAT('['), ell = SPLAT('L');
    while (p < e) {
        for (; p + 16 <= e; p += 16) {
            v16 x;
            memcpy(&x, p, 16);
            if (bitmask((v16)((x == quote) | (x == dquote) | (x == cr) | (x == bar) | (x == esc) | (x == open) | (x == ell))))
                break;
        }
        for (const char *stop = p + 16 <= e ? p + 16 : e; p < stop; p++)
            if (list_fails(lo, p, e)) return -1;
    }
    const char *first = q + 1;
    while (*first == ' ') first++;
    return *first == ']' ? 0 : (int)commas + 1;
}

/* kind (1, 2) and tokens of an ok line, or 0. */
static int classify(Hits *hits, Parsed *last, const char *s, const char *e, const char *next, const char *next_end,
                    int *tokens, int *month, const char **list) {
    const char *rec = NULL, *pti = NULL, *add = NULL;
    int nrec = count_in(&hits[H_REC], s, e, &rec), npti = count_in(&hits[H_PTI], s, e, &pti);
    int nadd = count_in(&hits[H_ADD], s, e, &add);
    Header h;
    if (next == NULL || !parsed(last, s, e, &h) || h.access) return 0;
    /* [s, h.msg) is ASCII: header() takes no byte over 0x7e */
    const char *m = h.msg;
    if (nrec == 1 && npti == 1 && nadd == 0 && rec == m && e - m > (Py_ssize_t)REC_N && m[REC_N] == ' ') {
        const char *q = m + REC_N + 1, *id = q;
        while (q < e && is_idchar(*q)) q++;
        if (q == id || q >= e || *q != ':') return 0;
        if (pti[-1] != ' ') return 0;
        q = pti + PTI_N;
        if (q >= e || *q != '[' || !clean_rest(m, q)) return 0;
        const char *close = NULL;
        int size = list_rest(m, q, e, &close);
        if (size < 0) return 0;
        *tokens = size;
        if (!safe_successor(last, next, next_end, &h, memchr(next, '\r', (size_t)(next_end - next)) != NULL)) return 0;
        *month = h.month;
        if (close && close > q + 1) {
            list[0] = q + 1;
            list[1] = close;
        }
        return 1;
    }
    if (nadd == 1 && nrec == 0 && npti == 0 && add == m && e - m > (Py_ssize_t)ADD_N + 1 && m[ADD_N] == ' ' &&
        is_idchar(m[ADD_N + 1])) {
        if (!clean_rest(m, e) || !safe_successor(last, next, next_end, &h, memchr(next, '\r', (size_t)(next_end - next)) != NULL)) return 0;
        *tokens = 0;
        *month = h.month;
        return 2;
    }
    return 0;
}

static const char *next_hot(Hits *hits, const char *line) {
    const char *best = NULL;
    for (int k = H_REC; k <= H_ADD; k++) {
        Hits *h = &hits[k];
        while (h->next < nhits(h) && hit(h, h->next) < line) h->next++;
        if (h->next < nhits(h) && (!best || hit(h, h->next) < best)) best = hit(h, h->next);
    }
    return best;
}

/* Can `starts` (n int64) be line starts of len bytes: 0 first, strictly ascending, none past the end?
 * (Not that they are: wrong ones give wrong lines, but every read stays inside the data.  Checking each '\n'
 * would touch every line of the window: 0.4 ms on one of short lines.) */
static int valid_starts(Py_ssize_t len, const int64_t *st, Py_ssize_t n) {
    if (n < 1 || st[0] != 0) return 0;
    for (Py_ssize_t i = 1; i < n; i++)
        if (st[i] <= st[i - 1] || st[i] > len) return 0;
    return 1;
}

PyObject *hot_scan(PyObject *self, PyObject *args) {
    Py_buffer view, starts;
    if (!PyArg_ParseTuple(args, "y*y*", &view, &starts)) return NULL;
    const char *data = view.buf, *end = data + view.len;
    const int64_t *st = starts.buf;
    Py_ssize_t lines = starts.len / (Py_ssize_t)sizeof(int64_t);
    Buf idx = {NULL, 0, 0, 4}, kind = {NULL, 0, 0, 1}, tok = {NULL, 0, 0, 4}, lists = {NULL, 0, 0, 16};
    Hits hits[H_N];
    memset(hits, 0, sizeof(hits));
    for (int k = 0; k < H_N; k++) hits[k].at.item = sizeof(char *);
    PyObject *bad = PyList_New(0), *result = NULL;
    int months = 0;
    if (!bad) goto done;
    if (starts.len % (Py_ssize_t)sizeof(int64_t) || !valid_starts(view.len, st, lines)) {
        PyErr_SetString(PyExc_ValueError, "hot_scan: starts are not the data's line starts");
        goto done;
    }
    /* telling bytes: the 'q' of "request", the 'k' of "token" */
    if (collect_requests(&hits[H_REC], &hits[H_ADD], data, end) < 0 || collect(&hits[H_PTI], data, end, PTI, PTI_N, 9) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    int32_t number = 0;
    Parsed last = {NULL, NULL, 0, {0}};
    for (const char *at = next_hot(hits, data); at; at = next_hot(hits, data + st[number])) {
        while (number + 1 < lines && st[number + 1] <= at - data) number++;
        const char *line = data + st[number], *line_end = number + 1 < lines ? data + st[number + 1] - 1 : end;
        const char *r = NULL;
        int bits = (count_in(&hits[H_REC], line, line_end, &r) ? 1 : 0) |
                   (count_in(&hits[H_PTI], line, line_end, &r) ? 2 : 0) |
                   (count_in(&hits[H_ADD], line, line_end, &r) ? 4 : 0);
        const char *next = number + 1 < lines ? data + st[number + 1] : NULL;
        const char *next_end = number + 2 < lines ? data + st[number + 2] - 1 : end;
        int tokens = 0, month = 0;
        const char *list[2] = {NULL, NULL};
        int k = classify(hits, &last, line, line_end, next, next_end, &tokens, &month, list);
        if (k) {
            uint8_t kb = (uint8_t)k;
            int32_t t = tokens;
            int64_t span[2] = {list[0] - data, list[1] - data};
            if (push(&idx, &number) < 0 || push(&kind, &kb) < 0 || push(&tok, &t) < 0 ||
                (list[0] && push(&lists, span) < 0)) {
                PyErr_NoMemory();
                goto done;
            }
            if (month == 1 || month == 12) months |= 1 << month; /* all the New Year guard asks */
        } else {
            PyObject *item = Py_BuildValue("(ii)", (int)number, bits);
            if (!item || PyList_Append(bad, item) < 0) {
                Py_XDECREF(item);
                goto done;
            }
            Py_DECREF(item);
        }
        if (number + 1 >= lines) break;
        number++;
    }
    result = Py_BuildValue("(y#y#y#Oiy#)", idx.data ? idx.data : "", idx.len, kind.data ? kind.data : "", kind.len,
                           tok.data ? tok.data : "", tok.len, bad, months, lists.data ? lists.data : "", lists.len);
done:
    Py_XDECREF(bad);
    PyMem_Free(idx.data);
    PyMem_Free(kind.data);
    PyMem_Free(tok.data);
    PyMem_Free(lists.data);
    for (int k = 0; k < H_N; k++) PyMem_Free(hits[k].at.data);
    PyBuffer_Release(&view);
    PyBuffer_Release(&starts);
    return result;
}

