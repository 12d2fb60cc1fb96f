/* The strict header grammar of the request lines hot_scan counts (_hotlines.c), a twin of
 * engdiag/logs/hotscan.py's _HEADER: an optional kubectl stamp and colour codes, an optional process tag, the
 * level, then the vLLM time and file:line (or ':' and whitespace: a uvicorn access line). */
#include "_scan.h"

static const char *digits(const char *p, const char *e, int n) {
    for (int i = 0; i < n; i++, p++)
        if (p >= e || !is_digit(*p)) return NULL;
    return p;
}

static const char *colour_codes(const char *p, const char *e) {
    /* ESC [ [0-9;]* m, any number of them */
    while (p + 1 < e && p[0] == '\x1b' && p[1] == '[') {
        const char *q = p + 2;
        while (q < e && (is_digit(*q) || *q == ';')) q++;
        if (q >= e || *q != 'm') return p;
        p = q + 1;
    }
    return p;
}

static const char *kube_stamp(const char *p, const char *e) {
    /* 20DD-DD-DDTDD:DD:DD(.D+)?(Z|[+-]DD:?DD) then one space */
    if (e - p < 21 || p[0] != '2' || p[1] != '0') return NULL;
    const char *q = digits(p, e, 4);
    if (!q || *q++ != '-' || !(q = digits(q, e, 2)) || *q++ != '-' || !(q = digits(q, e, 2)) || *q++ != 'T')
        return NULL;
    if (!(q = digits(q, e, 2)) || *q++ != ':' || !(q = digits(q, e, 2)) || *q++ != ':' || !(q = digits(q, e, 2)))
        return NULL;
    if (q < e && *q == '.') {
        const char *r = q + 1;
        while (r < e && is_digit(*r)) r++;
        if (r == q + 1) return NULL;
        q = r;
    }
    if (q < e && *q == 'Z') q++;
    else if (q < e && (*q == '+' || *q == '-')) {
        if (!(q = digits(q + 1, e, 2))) return NULL;
        if (q < e && *q == ':') q++;
        if (!(q = digits(q, e, 2))) return NULL;
    } else return NULL;
    if (q >= e || *q != ' ') return NULL;
    return q + 1;
}

/* The strict header grammar; 1 when the line has it (h filled), else 0. */
int header(const char *p, const char *e, Header *h) {
    memset(h, 0, sizeof(*h));
    if (e - p >= 2 && p[0] == '2' && p[1] == '0') {
        const char *q = kube_stamp(p, e);
        if (!q) return 0;
        p = q;
    }
    p = colour_codes(p, e);
    if (p < e && *p == '(') {
        const char *q = p + 1;
        if (q >= e || !((*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z') || *q == '_')) return 0;
        h->name = q++;
        while (q < e && is_idchar(*q) && q - h->name <= 60) q++;
        h->name_end = q;
        if (e - q < 6 || memcmp(q, " pid=", 5) != 0) return 0;
        q += 5;
        h->pid = q;
        while (q < e && is_digit(*q)) q++;
        if (q == h->pid || q >= e || *q != ')') return 0;
        h->pid_end = q++;
        q = colour_codes(q, e);
        if (q < e && (*q == ' ' || *q == '\t')) q++;
        p = q;
    }
    while (p < e && *p == ' ') p++;
    h->level = p;
    const char *q = level(p, e);
    if (!q) return 0;
    h->level_end = q;
    if (q < e && *q == ':') {
        if (q + 1 < e && (q[1] == ' ' || q[1] == '\t')) {
            h->access = 1;
            h->msg = q + 1;
            return 1;
        }
        return 0;
    }
    if (q >= e || *q++ != ' ') return 0;
    const char *t = q;
    if (!(q = digits(q, e, 2)) || *q++ != '-' || !(q = digits(q, e, 2)) || *q++ != ' ') return 0;
    if (!(q = digits(q, e, 2)) || *q++ != ':' || !(q = digits(q, e, 2)) || *q++ != ':' || !(q = digits(q, e, 2)))
        return 0;
    h->month = (t[0] - '0') * 10 + (t[1] - '0');
    if (q < e && *q == '.') {
        const char *r = q + 1;
        while (r < e && is_digit(*r)) r++;
        if (r == q + 1) return 0;
        q = r;
    }
    if (q >= e || *q++ != ' ') return 0;
    if (q < e && *q == '[') q++;
    const char *f = q;
    while (q < e && *q != ']' && (unsigned char)*q > ' ' && (unsigned char)*q < 0x7f) q++;
    if (q >= e || *q != ']') return 0;
    const char *d = q;
    while (d > f && is_digit(d[-1])) d--;
    if (d == q || d - 1 <= f || d[-1] != ':') return 0;
    h->file = f;
    h->file_end = q;
    q++;
    if (q < e && *q == ' ') q++;
    h->msg = q;
    return 1;
}
