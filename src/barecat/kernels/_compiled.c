/* barecat's compiled kernels: the same functions as barecat/kernels/python.py (the
 * reference), for the per-file loops where the interpreter is the limit.
 *
 * - crc32c(data, value=0): CRC32C with the CPU's instruction (SSE4.2 on x86-64, the CRC
 *   extension on ARMv8) in three interleaved streams, or slicing-by-8 tables where the
 *   CPU has neither (_crc32c_portable: the tables always, for the tests); its C is in
 *   crc32c.h, which builds without Python (tests/kernels/test_crc32c_cross.py runs it on
 *   ARMv8 under emulation);
 * - read_checked(fd, offset, size, crc): one pread plus its CRC check;
 * - read_each(fds, addresses): the same for a batch, the lock released once;
 * - AddressTable: the lookup table's probe (find, find_many) and a whole get;
 * - write_files(...): extraction's loop writing plain files, and read_rows(index, sql):
 *   every row of a statement read by SQLite's C interface (the library Python's sqlite3
 *   runs), as IndexRows, whose write() is that loop over them.
 *
 * The kernels never decide anything and never raise for what they read: whatever is not
 * clean (a short read, a CRC mismatch, an error of the system, a size over 16 MiB, an
 * address the table cannot hold) is answered with None, and the Python caller takes its
 * careful path, which raises the right error. Only wrong argument types raise
 * (TypeError, ValueError, OverflowError), and MemoryError.
 *
 * Built on the stable ABI (Py_LIMITED_API, 3.11: the buffer protocol) where the Python
 * building it allows, so one wheel serves every later Python.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define SPAN ((Py_ssize_t)16 << 20) /* larger reads are the careful path's (it checks the shard's size first) */
#define WORDS 4                     /* u64 words a slot: hash, shard|offset, path ref, crc|size */
#define OFFSET_BITS 48
#define OFFSET_MASK ((UINT64_C(1) << OFFSET_BITS) - 1)
#define LENGTH_BITS 24
#define LENGTH_MASK ((UINT64_C(1) << LENGTH_BITS) - 1)

/* ---------------------------------------------------------------- CRC32C -------- */

#include "crc32c.h" /* the CRC itself, without the Python API; here its Python entry points */

#define RELEASE_ABOVE 32768 /* bytes; below, releasing the lock costs more than the CRC */

/* The arguments of crc32c(data, value=0), by position or by name (as the crc32c
 * package takes them): 0, or -1 with a TypeError set. */
static int crc_arguments(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                         PyObject **data, PyObject **value) {
    *data = nargs >= 1 ? args[0] : NULL;
    *value = nargs >= 2 ? args[1] : NULL;
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_Size(kwnames);
    for (Py_ssize_t k = 0; k < nkw && nargs <= 2; k++) {
        PyObject *name = PyTuple_GetItem(kwnames, k);
        PyObject **slot = PyUnicode_CompareWithASCIIString(name, "data") == 0    ? data
                          : PyUnicode_CompareWithASCIIString(name, "value") == 0 ? value
                                                                                 : NULL;
        if (slot == NULL || *slot != NULL) {
            nargs = 3; /* (unknown, or given twice) */
            break;
        }
        *slot = args[nargs + k];
    }
    if (nargs > 2 || *data == NULL) {
        PyErr_SetString(PyExc_TypeError, "crc32c(data, value=0)");
        return -1;
    }
    return 0;
}

/* crc32c(data, value=0) computed by `of`. */
static PyObject *crc_call(uint32_t (*of)(uint32_t, const unsigned char *, size_t),
                          PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames) {
    PyObject *data, *value_obj;
    if (crc_arguments(args, nargs, kwnames, &data, &value_obj) < 0) {
        return NULL;
    }
    unsigned long value = 0;
    if (value_obj != NULL) {
        value = PyLong_AsUnsignedLongMask(value_obj);
        if (value == (unsigned long)-1 && PyErr_Occurred()) {
            return NULL;
        }
    }
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    uint32_t crc;
    if (view.len >= RELEASE_ABOVE) {
        Py_BEGIN_ALLOW_THREADS
        crc = of((uint32_t)value, view.buf, (size_t)view.len);
        Py_END_ALLOW_THREADS
    } else {
        crc = of((uint32_t)value, view.buf, (size_t)view.len);
    }
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
}

static PyObject *k_crc32c(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                          PyObject *kwnames) {
    (void)module;
    return crc_call(crc32c_of, args, nargs, kwnames);
}

static PyObject *k_crc32c_portable(PyObject *module, PyObject *const *args, Py_ssize_t nargs,
                                   PyObject *kwnames) {
    (void)module;
    return crc_call(crc32c_portable_of, args, nargs, kwnames);
}

/* ------------------------------------------------------------------ reads -------- */

/* Fill buf[0:size] from fd at offset; 0 when all of it came and (if crc >= 0) its CRC
 * matches, else -1. Called without the lock. */
static int pread_checked(int fd, char *buf, Py_ssize_t size, long long offset, long long crc) {
    Py_ssize_t got = 0;
    while (got < size) {
        ssize_t r = pread(fd, buf + got, (size_t)(size - got), (off_t)(offset + got));
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            return -1;
        }
        got += r;
    }
    return crc < 0 || crc32c_of(0, (const unsigned char *)buf, (size_t)size) == (uint32_t)crc ? 0 : -1;
}

/* The CRC argument: -1 for None (no check), -2 for what no CRC32C can be (never matches). */
static long long crc_argument(PyObject *o) {
    if (o == Py_None) {
        return -1;
    }
    long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) {
            return -3;
        }
        PyErr_Clear();
        return -2;
    }
    return v < 0 || v > 0xFFFFFFFFLL ? -2 : v;
}

/* Whether an address can be read here: sizes 0..SPAN at offsets >= 0. */
static int readable(long long offset, Py_ssize_t size) {
    return offset >= 0 && size >= 0 && size <= SPAN && offset <= INT64_MAX - size;
}

/* bytes of one checked read, or None (see the file's head). */
static PyObject *one_read(int fd, long long offset, Py_ssize_t size, long long crc) {
    if (crc == -2 || !readable(offset, size) || fd < 0) {
        Py_RETURN_NONE;
    }
    if (size == 0) {
        if (crc > 0) {
            Py_RETURN_NONE;
        }
        return PyBytes_FromStringAndSize(NULL, 0);
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, size);
    if (out == NULL) {
        return NULL;
    }
    char *buf = PyBytes_AsString(out);
    int bad;
    Py_BEGIN_ALLOW_THREADS
    bad = pread_checked(fd, buf, size, offset, crc);
    Py_END_ALLOW_THREADS
    if (bad) {
        Py_DECREF(out);
        Py_RETURN_NONE;
    }
    return out;
}

static int int_argument(PyObject *o, long long *out) {
    *out = PyLong_AsLongLong(o);
    if (*out == -1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) {
            return -1;
        }
        PyErr_Clear();
        *out = -1; /* out of range: no address there */
    }
    return 0;
}

static PyObject *k_read_checked(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "read_checked(fd, offset, size, crc)");
        return NULL;
    }
    long long fd, offset, size, crc;
    if (int_argument(args[0], &fd) || int_argument(args[1], &offset) ||
        int_argument(args[2], &size) || (crc = crc_argument(args[3])) == -3) {
        return NULL;
    }
    if (fd > INT32_MAX || size > SPAN) {
        Py_RETURN_NONE;
    }
    return one_read((int)fd, offset, (Py_ssize_t)size, crc);
}

/* One address of a batch, unpacked; fd -1 where the shard has none open. */
typedef struct {
    int fd;
    long long offset;
    Py_ssize_t size;
    long long crc;
    char *buf;
} Planned;

static int plan_one(PyObject *fds, PyObject *address, Planned *p) {
    if (!PyTuple_Check(address) || PyTuple_Size(address) != 4) {
        PyErr_SetString(PyExc_TypeError, "an address is a tuple (shard, offset, size, crc32c)");
        return -1;
    }
    long long fd = -1, offset, size;
    PyObject *got = PyDict_GetItemWithError(fds, PyTuple_GetItem(address, 0));
    if (got == NULL && PyErr_Occurred()) {
        return -1;
    }
    if (got != NULL && got != Py_None && int_argument(got, &fd)) { /* (None: none open) */
        return -1;
    }
    if (int_argument(PyTuple_GetItem(address, 1), &offset) ||
        int_argument(PyTuple_GetItem(address, 2), &size) ||
        (p->crc = crc_argument(PyTuple_GetItem(address, 3))) == -3) {
        return -1;
    }
    int ok = fd >= 0 && fd <= INT32_MAX && p->crc != -2 && size <= SPAN &&
             readable(offset, (Py_ssize_t)size) && !(size == 0 && p->crc > 0);
    p->fd = ok ? (int)fd : -1;
    p->offset = offset;
    p->size = ok ? (Py_ssize_t)size : 0;
    p->buf = NULL;
    return 0;
}

#define WAITING_READ_NS 100000 /* a read that took longer and slept waited (shards/concurrent.py) */

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* The calling thread's sleeps so far (voluntary context switches), -1 where not counted. */
static long sleeps_so_far(void) {
#ifdef RUSAGE_THREAD
    struct rusage usage;
    if (getrusage(RUSAGE_THREAD, &usage) == 0) {
        return usage.ru_nvcsw;
    }
#endif
    return -1;
}

/* One planned read that stops a batch when its storage would wait: 1 if the storage
 * would wait (the read not made, where RWF_NOWAIT tells), else 0 with p->fd -1 where
 * the read failed. *nowait: 1 while RWF_NOWAIT is answered (else 0: timed reads). */
static int read_or_wait(Planned *p, int *nowait, long slept_at_start) {
    Py_ssize_t got = 0;
#ifdef RWF_NOWAIT
    if (*nowait) {
        struct iovec v = {p->buf, (size_t)p->size};
        ssize_t r;
        do {
            r = preadv2(p->fd, &v, 1, (off_t)p->offset, RWF_NOWAIT);
        } while (r < 0 && errno == EINTR);
        if (r < 0 && errno == EAGAIN) {
            return 1;
        }
        if (r < 0 && (errno == EOPNOTSUPP || errno == EINVAL || errno == ENOSYS)) {
            *nowait = 0;
        } else if (r < 0) {
            p->fd = -1;
            return 0;
        } else {
            got = r;
        }
    }
#else
    *nowait = 0;
#endif
    long long started = *nowait ? 0 : now_ns();
    if (got < p->size &&
        pread_checked(p->fd, p->buf + got, p->size - got, p->offset + got, -1) != 0) {
        p->fd = -1;
    } else if (p->crc >= 0 && crc32c_of(0, (const unsigned char *)p->buf, (size_t)p->size) != (uint32_t)p->crc) {
        p->fd = -1;
    }
    if (!*nowait && now_ns() - started > WAITING_READ_NS &&
        (slept_at_start < 0 || sleeps_so_far() != slept_at_start)) {
        return 2; /* made, and it waited: the batch stops after it */
    }
    return 0;
}

/* Make the planned reads without the lock, in order; returns how many were made (count,
 * or fewer when stop_on_wait and a read waited: see read_or_wait). Failed reads get fd -1. */
static Py_ssize_t run_planned(Planned *plan, Py_ssize_t count, int stop_on_wait) {
    Py_ssize_t made = count;
    Py_BEGIN_ALLOW_THREADS
    int nowait = 1;
    long slept = stop_on_wait ? sleeps_so_far() : -1;
    for (Py_ssize_t k = 0; k < count; k++) {
        Planned *p = &plan[k];
        if (p->buf == NULL || p->size == 0) {
            continue;
        }
        if (!stop_on_wait) {
            if (pread_checked(p->fd, p->buf, p->size, p->offset, p->crc)) {
                p->fd = -1;
            }
            continue;
        }
        int waited = read_or_wait(p, &nowait, slept);
        if (waited) {
            made = waited == 1 ? k : k + 1;
            break;
        }
    }
    Py_END_ALLOW_THREADS
    return made;
}

/* The list of a batch's results: bytes for each read made and clean, None for the rest. */
static PyObject *finish_planned(Planned *plan, Py_ssize_t count, Py_ssize_t made, PyObject *out) {
    for (Py_ssize_t k = 0; k < count; k++) {
        if (plan[k].buf != NULL && (plan[k].fd < 0 || k >= made)) {
            PyList_SetItem(out, k, Py_NewRef(Py_None));
        }
    }
    PyMem_Free(plan);
    return out;
}

/* The bytes objects of a plan, made in request order (see shards/sharder.py), in `out`. */
static int allocate_planned(Planned *plan, Py_ssize_t count, PyObject *out) {
    for (Py_ssize_t k = 0; k < count; k++) {
        Planned *p = &plan[k];
        PyObject *item = p->fd < 0 ? Py_NewRef(Py_None) : PyBytes_FromStringAndSize(NULL, p->size);
        if (item == NULL) {
            return -1;
        }
        PyList_SetItem(out, k, item);
        p->buf = p->fd < 0 ? NULL : PyBytes_AsString(item);
    }
    return 0;
}

/* Plans the read of one item of a batch (0, or -1 with an error set). */
typedef int (*planner)(void *context, PyObject *item, Planned *p);

/* The results of reading each item of the list `items` as `plan_item` plans it (see
 * finish_planned). The batch is the list as it is at the call (a copy): what planning an
 * item runs (a shard's __hash__, a field's __index__) may change the caller's list, not
 * this one. */
static PyObject *read_batch(PyObject *items, planner plan_item, void *context, int stop_on_wait) {
    PyObject *batch = PyList_GetSlice(items, 0, PY_SSIZE_T_MAX);
    if (batch == NULL) {
        return NULL;
    }
    Py_ssize_t count = PyList_Size(batch);
    Planned *plan = PyMem_Calloc((size_t)(count ? count : 1), sizeof(Planned));
    PyObject *out = PyList_New(count);
    if (plan == NULL || out == NULL) {
        PyMem_Free(plan);
        Py_XDECREF(out);
        Py_DECREF(batch);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t k = 0; k < count; k++) {
        if (plan_item(context, PyList_GetItem(batch, k), &plan[k]) < 0) {
            PyMem_Free(plan);
            Py_DECREF(out);
            Py_DECREF(batch);
            return NULL;
        }
    }
    Py_DECREF(batch);
    if (allocate_planned(plan, count, out) < 0) {
        PyMem_Free(plan);
        Py_DECREF(out);
        return NULL;
    }
    return finish_planned(plan, count, run_planned(plan, count, stop_on_wait), out);
}

static int plan_address(void *fds, PyObject *address, Planned *p) {
    return plan_one(fds, address, p);
}

static PyObject *k_read_each(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs < 2 || nargs > 3 || !PyDict_Check(args[0]) || !PyList_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "read_each(fds: dict, addresses: list, stop_on_wait=False)");
        return NULL;
    }
    int stop_on_wait = nargs == 3 ? PyObject_IsTrue(args[2]) : 0;
    if (stop_on_wait < 0) {
        return NULL;
    }
    return read_batch(args[1], plan_address, args[0], stop_on_wait);
}

/* ------------------------------------------------------------ the lookup table -------- */

typedef struct {
    PyObject_HEAD
    Py_buffer slots; /* u64 words, WORDS a slot */
    Py_buffer paths;
    Py_buffer header;  /* the index's first bytes (obj NULL: no check) */
    char counter[4];   /* its change counter (bytes 24-27) when the table was made */
    Py_ssize_t paths_start;
    uint64_t capacity;
    PyObject *hash;    /* xxh3_64_intdigest */
    PyObject *address; /* the Address type */
    int address_unsafe; /* tuple.__new__ refuses it (see tuple_new_refuses) */
} Table;

/* Whether Python's tuple.__new__ refuses to make a `type` (a struct sequence such as
 * os.stat_result: made as a bare tuple, its hidden fields would be read past its end);
 * the reference makes its addresses with tuple.__new__, so it raises TypeError for
 * each address of such a type: so does address_at. -1 with an error set. */
static int tuple_new_refuses(PyObject *type) {
    PyObject *made = PyObject_CallMethod((PyObject *)&PyTuple_Type, "__new__", "O()", type);
    if (made != NULL) {
        Py_DECREF(made);
        return 0;
    }
    if (!PyErr_ExceptionMatches(PyExc_TypeError)) {
        return -1;
    }
    PyErr_Clear();
    return 1;
}

static int table_init(PyObject *self_obj, PyObject *args, PyObject *kwargs) {
    Table *self = (Table *)self_obj;
    PyObject *slots, *paths, *start, *hash, *address, *header = Py_None, *counter = Py_None;
    if (kwargs != NULL && PyDict_Size(kwargs) != 0) {
        PyErr_SetString(PyExc_TypeError, "AddressTable takes positional arguments only");
        return -1;
    }
    if (!PyArg_ParseTuple(args, "OOOOO|OO", &slots, &paths, &start, &hash, &address, &header,
                          &counter)) {
        return -1;
    }
    PyObject *start_int = PyNumber_Index(start); /* (TypeError for what is not an int) */
    if (start_int == NULL) {
        return -1;
    }
    Py_ssize_t paths_start = PyLong_AsSsize_t(start_int);
    Py_DECREF(start_int);
    if (paths_start == -1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) {
            return -1;
        }
        PyErr_Clear(); /* (past any buffer: out of shape, below) */
    }
    if (self->slots.obj != NULL || self->paths.obj != NULL) {
        PyErr_SetString(PyExc_TypeError, "AddressTable is initialized once");
        return -1;
    }
    if (PyObject_GetBuffer(slots, &self->slots, PyBUF_SIMPLE) < 0) {
        return -1;
    }
    if (PyObject_GetBuffer(paths, &self->paths, PyBUF_SIMPLE) < 0) {
        return -1;
    }
    Py_ssize_t slot_bytes = 8 * WORDS;
    if (self->slots.len < slot_bytes || self->slots.len % slot_bytes != 0 || paths_start < 0 ||
        paths_start > self->paths.len || ((uintptr_t)self->slots.buf & 7) != 0) {
        PyErr_SetString(PyExc_ValueError, "not a lookup table: slots or paths out of shape");
        return -1;
    }
    if (!PyType_Check(address) || !PyType_IsSubtype((PyTypeObject *)address, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "the address type is a tuple subtype");
        return -1;
    }
    if (header != Py_None) {
        char *c;
        Py_ssize_t n;
        if (!PyBytes_Check(counter) || PyBytes_AsStringAndSize(counter, &c, &n) < 0 || n != 4) {
            PyErr_SetString(PyExc_TypeError, "the counter is 4 bytes");
            return -1;
        }
        if (PyObject_GetBuffer(header, &self->header, PyBUF_SIMPLE) < 0) {
            return -1;
        }
        if (self->header.len < 28) {
            PyErr_SetString(PyExc_ValueError, "the index header has 28 bytes or more");
            return -1;
        }
        memcpy(self->counter, c, 4);
    }
    if ((self->address_unsafe = tuple_new_refuses(address)) < 0) {
        return -1;
    }
    self->capacity = (uint64_t)(self->slots.len / slot_bytes);
    self->paths_start = paths_start;
    self->hash = Py_NewRef(hash);
    self->address = Py_NewRef(address);
    return 0;
}

static void table_dealloc(PyObject *self_obj) {
    Table *self = (Table *)self_obj;
    if (self->slots.obj != NULL) {
        PyBuffer_Release(&self->slots);
    }
    if (self->paths.obj != NULL) {
        PyBuffer_Release(&self->paths);
    }
    if (self->header.obj != NULL) {
        PyBuffer_Release(&self->header);
    }
    Py_XDECREF(self->hash);
    Py_XDECREF(self->address);
    PyTypeObject *type = Py_TYPE(self_obj);
    freefunc free_self = (freefunc)PyType_GetSlot(type, Py_tp_free);
    free_self(self_obj);
    Py_DECREF(type);
}

/* (h * capacity) >> 64: the slot a hash starts at ("fastrange"). */
static inline uint64_t high_product(uint64_t a, uint64_t b) {
#if defined(__SIZEOF_INT128__)
    return (uint64_t)(((unsigned __int128)a * b) >> 64);
#else
    uint64_t a0 = a & 0xFFFFFFFFu, a1 = a >> 32, b0 = b & 0xFFFFFFFFu, b1 = b >> 32;
    uint64_t mid = (a0 * b0 >> 32) + (a1 * b0 & 0xFFFFFFFFu) + a0 * b1;
    return a1 * b1 + (a1 * b0 >> 32) + (mid >> 32);
#endif
}

/* The slot's first word index holding `key` (hash `h`), or -1. Each slot is visited at
 * most once, so even a table without an empty slot ends every probe. */
static Py_ssize_t probe(Table *self, const char *key, Py_ssize_t len, uint64_t h) {
    const uint64_t *slots = self->slots.buf;
    const char *paths = (const char *)self->paths.buf;
    Py_ssize_t paths_len = self->paths.len;
    uint64_t capacity = self->capacity;
    uint64_t i = high_product(h, capacity);
    for (uint64_t visited = 0; visited < capacity; visited++) {
        uint64_t current = slots[i * WORDS];
        if (current == 0) {
            return -1;
        }
        if (current == h) {
            uint64_t ref = slots[i * WORDS + 2];
            uint64_t start = (uint64_t)self->paths_start + (ref >> LENGTH_BITS);
            uint64_t n = ref & LENGTH_MASK;
            /* (a path reaching past the end is cut there, as Python's slicing cuts it) */
            uint64_t avail = start >= (uint64_t)paths_len ? 0 : (uint64_t)paths_len - start;
            if (n > avail) {
                n = avail;
            }
            if (n == (uint64_t)len && (n == 0 || memcmp(paths + start, key, (size_t)n) == 0)) {
                return (Py_ssize_t)(i * WORDS);
            }
        }
        if (++i == capacity) {
            i = 0;
        }
    }
    return -1;
}

/* The slot of the key p[0:len]: -1 not there, -2 an error set (by the hash). */
static Py_ssize_t slot_of_key(Table *self, const char *p, Py_ssize_t len) {
    PyObject *key = PyBytes_FromStringAndSize(p, len);
    if (key == NULL) {
        return -2;
    }
    PyObject *hashed = PyObject_CallFunctionObjArgs(self->hash, key, NULL);
    Py_DECREF(key);
    if (hashed == NULL) {
        return -2;
    }
    uint64_t h = PyLong_AsUnsignedLongLongMask(hashed);
    Py_DECREF(hashed);
    if (h == (uint64_t)-1 && PyErr_Occurred()) {
        return -2;
    }
    return probe(self, p, len, h ? h : 1);
}

/* The slot of a path (any str, encoded with surrogates escaped): -1 not there, -2 an
 * error set. */
static Py_ssize_t slot_of(Table *self, PyObject *path) {
    if (!PyUnicode_Check(path)) {
        PyErr_SetString(PyExc_TypeError, "a path is a str");
        return -2;
    }
    PyObject *key = PyUnicode_AsEncodedString(path, "utf-8", "surrogateescape");
    if (key == NULL) {
        return -2;
    }
    char *bytes;
    Py_ssize_t len;
    PyBytes_AsStringAndSize(key, &bytes, &len);
    Py_ssize_t at = slot_of_key(self, bytes, len);
    Py_DECREF(key);
    return at;
}

static newfunc tuple_new; /* tuple's own tp_new: makes an Address without a Python call */

static PyObject *address_at(Table *self, Py_ssize_t at) {
    const uint64_t *slots = self->slots.buf;
    uint64_t word = slots[at + 1], size_crc = slots[at + 3];
    PyObject *f[4] = {
        PyLong_FromUnsignedLongLong(word >> OFFSET_BITS),
        PyLong_FromUnsignedLongLong(word & OFFSET_MASK),
        PyLong_FromUnsignedLongLong(size_crc & 0xFFFFFFFFu),
        PyLong_FromUnsignedLongLong(size_crc >> 32),
    };
    PyObject *fields = NULL, *args = NULL, *out = NULL;
    if (f[0] && f[1] && f[2] && f[3]) {
        fields = PyTuple_Pack(4, f[0], f[1], f[2], f[3]);
    }
    if (fields != NULL) {
        args = PyTuple_Pack(1, fields);
    }
    if (args != NULL && self->address_unsafe) { /* (raises the reference's TypeError) */
        out = PyObject_CallMethod((PyObject *)&PyTuple_Type, "__new__", "OO", self->address, fields);
    } else if (args != NULL) {
        out = tuple_new((PyTypeObject *)self->address, args, NULL);
    }
    for (int k = 0; k < 4; k++) {
        Py_XDECREF(f[k]);
    }
    Py_XDECREF(fields);
    Py_XDECREF(args);
    return out;
}

static PyObject *table_find(PyObject *self_obj, PyObject *path) {
    Table *self = (Table *)self_obj;
    Py_ssize_t at = slot_of(self, path);
    if (at == -2) {
        return NULL;
    }
    if (at < 0) {
        Py_RETURN_NONE;
    }
    return address_at(self, at);
}

typedef struct {
    uint64_t word;
    Py_ssize_t pos;
    Py_ssize_t at;
} Found;

static int by_word(const void *a, const void *b) {
    const Found *x = a, *y = b;
    if (x->word != y->word) {
        return x->word < y->word ? -1 : 1;
    }
    return x->pos < y->pos ? -1 : x->pos > y->pos; /* (a stable sort's order) */
}

static PyObject *table_find_many(PyObject *self_obj, PyObject *asked) {
    Table *self = (Table *)self_obj;
    if (!PyList_Check(asked)) {
        PyErr_SetString(PyExc_TypeError, "find_many takes a list of paths");
        return NULL;
    }
    PyObject *paths = PyList_GetSlice(asked, 0, PY_SSIZE_T_MAX); /* (the hash cannot change it) */
    if (paths == NULL) {
        return NULL;
    }
    Py_ssize_t count = PyList_Size(paths);
    Found *found = PyMem_Calloc((size_t)(count ? count : 1), sizeof(Found));
    if (found == NULL) {
        Py_DECREF(paths);
        return PyErr_NoMemory();
    }
    const uint64_t *slots = self->slots.buf;
    for (Py_ssize_t k = 0; k < count; k++) {
        Py_ssize_t at = slot_of(self, PyList_GetItem(paths, k));
        if (at < 0) {
            PyMem_Free(found);
            Py_DECREF(paths);
            if (at == -2) {
                return NULL;
            }
            Py_RETURN_NONE;
        }
        found[k].word = slots[at + 1];
        found[k].pos = k;
        found[k].at = at;
    }
    qsort(found, (size_t)count, sizeof(Found), by_word);
    PyObject *out = PyList_New(count);
    for (Py_ssize_t k = 0; out != NULL && k < count; k++) {
        PyObject *address = address_at(self, found[k].at);
        PyObject *pair = address == NULL ? NULL : Py_BuildValue("(nN)", found[k].pos, address);
        if (pair == NULL) {
            Py_CLEAR(out);
            break;
        }
        PyList_SetItem(out, k, pair);
    }
    PyMem_Free(found);
    Py_DECREF(paths);
    return out;
}

/* Whether n bytes of UTF-8 at p are a path surely in normal form: not empty, not
 * starting with '/' or '.', not ending with '/', without "//", "/." or NUL. */
static int canonical_bytes(const char *p, Py_ssize_t n) {
    if (n == 0 || p[0] == '/' || p[0] == '.' || p[n - 1] == '/' || memchr(p, 0, (size_t)n)) {
        return 0;
    }
    for (const char *s = memchr(p, '/', (size_t)n); s != NULL;
         s = memchr(s + 1, '/', (size_t)(p + n - s - 1))) {
        if (s[1] == '/' || s[1] == '.') { /* (s < p + n - 1: the last byte is not '/') */
            return 0;
        }
    }
    return 1;
}

/* Whether a path is surely in normal form (barecat.paths.normalize gives it back as it
 * is): a str (not a subclass), UTF-8 without lone surrogates, and canonical_bytes. Others
 * are the careful path's (which normalizes them). Its UTF-8, or NULL. */
static const char *canonical(PyObject *path, Py_ssize_t *len) {
    if (!PyUnicode_CheckExact(path)) {
        return NULL;
    }
    const char *p = PyUnicode_AsUTF8AndSize(path, len);
    if (p == NULL) {
        PyErr_Clear(); /* (lone surrogates: not UTF-8) */
        return NULL;
    }
    return canonical_bytes(p, *len) ? p : NULL;
}

/* Whether a commit moved the index's change counter since the table was made. */
static int stale(Table *self) {
    return self->header.obj != NULL &&
           memcmp((const char *)self->header.buf + 24, self->counter, 4) != 0;
}

/* The plan of one path of get_many: fd -1 (None) unless surely normal, held, and its
 * shard open; 0, or -1 with an error set. */
static int plan_path(Table *self, PyObject *path, PyObject *fds, Planned *p) {
    p->fd = -1;
    p->buf = NULL;
    p->size = 0;
    Py_ssize_t len;
    const char *key = canonical(path, &len);
    if (key == NULL) {
        return 0;
    }
    Py_ssize_t at = slot_of_key(self, key, len);
    if (at < 0) {
        return at == -2 ? -1 : 0;
    }
    const uint64_t *slots = self->slots.buf;
    uint64_t word = slots[at + 1], size_crc = slots[at + 3];
    PyObject *shard = PyLong_FromUnsignedLongLong(word >> OFFSET_BITS);
    if (shard == NULL) {
        return -1;
    }
    PyObject *fd_obj = PyDict_GetItemWithError(fds, shard);
    Py_DECREF(shard);
    long long fd;
    if (fd_obj == NULL || fd_obj == Py_None) { /* (None: none open) */
        return PyErr_Occurred() ? -1 : 0;
    }
    if (int_argument(fd_obj, &fd)) {
        return -1;
    }
    p->offset = (long long)(word & OFFSET_MASK);
    p->crc = (long long)(size_crc >> 32);
    Py_ssize_t size = (Py_ssize_t)(size_crc & 0xFFFFFFFFu);
    if (fd >= 0 && fd <= INT32_MAX && readable(p->offset, size) && !(size == 0 && p->crc > 0)) {
        p->fd = (int)fd;
        p->size = size;
    }
    return 0;
}

typedef struct {
    Table *self;
    PyObject *fds;
    int moved;
} Paths;

static int plan_of_path(void *context, PyObject *path, Planned *p) {
    Paths *c = context;
    if (c->moved) {
        p->fd = -1;
        return 0;
    }
    return plan_path(c->self, path, c->fds, p);
}

/* get_many(paths, fds): get of each path, reads in request order with the lock let go
 * once, stopping at a read that would wait (the rest None: the careful path's). */
static PyObject *table_get_many(PyObject *self_obj, PyObject *const *args, Py_ssize_t nargs) {
    Table *self = (Table *)self_obj;
    if (nargs != 2 || !PyList_Check(args[0]) || !PyDict_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "get_many(paths: list, fds: dict)");
        return NULL;
    }
    Paths context = {self, args[1], stale(self)};
    return read_batch(args[0], plan_of_path, &context, 1);
}

/* get(path, fds): the file's checked bytes, or None for the careful path. */
static PyObject *table_get(PyObject *self_obj, PyObject *const *args, Py_ssize_t nargs) {
    Table *self = (Table *)self_obj;
    if (nargs != 2 || !PyDict_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "get(path, fds: dict)");
        return NULL;
    }
    Planned p;
    if (stale(self)) {
        Py_RETURN_NONE;
    }
    if (plan_path(self, args[0], args[1], &p) < 0) {
        return NULL;
    }
    if (p.fd < 0) {
        Py_RETURN_NONE;
    }
    return one_read(p.fd, p.offset, p.size, p.crc);
}

static PyMethodDef table_methods[] = {
    {"find", (PyCFunction)table_find, METH_O,
     "find(path): the Address of a path, or None when the table does not hold it."},
    {"find_many", (PyCFunction)table_find_many, METH_O,
     "find_many(paths): [(position, Address)] sorted by address, or None if one is missing."},
    {"get", (PyCFunction)(void (*)(void))table_get, METH_FASTCALL,
     "get(path, fds): the file's CRC-checked bytes, or None for the careful path."},
    {"get_many", (PyCFunction)(void (*)(void))table_get_many, METH_FASTCALL,
     "get_many(paths, fds): get of each, in order, stopping where a read would wait."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot table_slots[] = {
    {Py_tp_init, (void *)table_init},
    {Py_tp_dealloc, (void *)table_dealloc},
    {Py_tp_methods, table_methods},
    {Py_tp_doc, "AddressTable(slots, paths, paths_start, hash, address, header=None, "
                "counter=None): the lookup table's probe over its slot words and path bytes."},
    {Py_tp_new, (void *)PyType_GenericNew},
    {0, NULL},
};

static PyType_Spec table_spec = {
    "barecat.kernels._compiled.AddressTable", sizeof(Table), 0, Py_TPFLAGS_DEFAULT, table_slots,
};

/* ------------------------------------------------------------ building a table -------- */

#define MAX_SHARD ((UINT64_C(1) << (64 - OFFSET_BITS)) - 1)
#define MAX_PATH_START ((UINT64_C(1) << (64 - LENGTH_BITS)) - 1)

/* An exact int (not bool, not a subclass) in low..high, into *out. */
static int exact_in(PyObject *o, long long low, long long high, long long *out) {
    if (!PyLong_CheckExact(o)) {
        return 0;
    }
    int overflow;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    if (v < low || v > high) {
        return 0;
    }
    *out = v;
    return 1;
}

/* An exact int in 0..most (below 2**63), into *out; 0 when it is not. */
static int word_of(PyObject *o, uint64_t most, uint64_t *out) {
    long long v;
    if (!exact_in(o, 0, (long long)most, &v)) {
        return 0;
    }
    *out = (uint64_t)v;
    return 1;
}

/* fill_table(slots, paths, rows, hash, stored): see python.py. */
static PyObject *k_fill_table(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 5 || !PyByteArray_Check(args[1]) || !PyList_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "fill_table(slots, paths: bytearray, rows: list, hash, stored)");
        return NULL;
    }
    Py_ssize_t stored = PyLong_AsSsize_t(args[4]);
    if (stored == -1 && PyErr_Occurred()) {
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_WRITABLE) < 0) {
        return NULL;
    }
    if (view.len < 8 * WORDS || view.len % (8 * WORDS) != 0 || ((uintptr_t)view.buf & 7) != 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "not a lookup table: slots out of shape");
        return NULL;
    }
    uint64_t *slots = view.buf;
    uint64_t capacity = (uint64_t)(view.len / (8 * WORDS));
    PyObject *paths = args[1], *rows = args[2], *hash = args[3];
    Py_ssize_t count = PyList_Size(rows);
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *row = PyList_GetItem(rows, k);
        if (!PyTuple_Check(row) || PyTuple_Size(row) != 5) {
            PyBuffer_Release(&view);
            PyErr_SetString(PyExc_TypeError, "a row is (path, shard, offset, size, crc32c)");
            return NULL;
        }
        PyObject *path = PyTuple_GetItem(row, 0);
        uint64_t shard, offset, size, crc;
        if (!PyUnicode_CheckExact(path) || !word_of(PyTuple_GetItem(row, 1), MAX_SHARD, &shard) ||
            !word_of(PyTuple_GetItem(row, 2), OFFSET_MASK, &offset) ||
            !word_of(PyTuple_GetItem(row, 3), 0xFFFFFFFFu, &size) ||
            !word_of(PyTuple_GetItem(row, 4), 0xFFFFFFFFu, &crc)) {
            continue; /* (the table does not hold it: SQLite answers) */
        }
        PyObject *key = PyUnicode_AsEncodedString(path, "utf-8", "surrogateescape");
        if (key == NULL) {
            if (PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
                PyErr_Clear(); /* (a surrogate no byte stands for: SQLite answers) */
                continue;
            }
            PyBuffer_Release(&view);
            return NULL;
        }
        char *bytes;
        Py_ssize_t len;
        PyBytes_AsStringAndSize(key, &bytes, &len);
        Py_ssize_t start = PyByteArray_Size(paths);
        if ((uint64_t)len > LENGTH_MASK || (uint64_t)start > MAX_PATH_START) {
            Py_DECREF(key);
            continue;
        }
        if ((uint64_t)stored == capacity) { /* more rows than counted: a damaged index */
            Py_DECREF(key);
            PyBuffer_Release(&view);
            return PyLong_FromLong(-1);
        }
        PyObject *hashed = PyObject_CallFunctionObjArgs(hash, key, NULL);
        uint64_t h = hashed == NULL ? 0 : PyLong_AsUnsignedLongLongMask(hashed);
        Py_XDECREF(hashed);
        if (hashed == NULL || (h == (uint64_t)-1 && PyErr_Occurred()) ||
            PyByteArray_Resize(paths, start + len) < 0) {
            Py_DECREF(key);
            PyBuffer_Release(&view);
            return NULL;
        }
        memcpy(PyByteArray_AsString(paths) + start, bytes, (size_t)len);
        Py_DECREF(key);
        h = h ? h : 1; /* 0 marks an empty slot */
        uint64_t i = high_product(h, capacity), visited = 0;
        while (slots[i * WORDS] != 0 && ++visited < capacity) { /* equal hashes sit side by
                                                                     side: paths tell them apart */
            i = i + 1 < capacity ? i + 1 : 0;
        }
        if (slots[i * WORDS] != 0) { /* no empty slot: not a table being built */
            PyBuffer_Release(&view);
            return PyLong_FromLong(-1);
        }
        slots[i * WORDS] = h;
        slots[i * WORDS + 1] = shard << OFFSET_BITS | offset;
        slots[i * WORDS + 2] = (uint64_t)start << LENGTH_BITS | (uint64_t)len;
        slots[i * WORDS + 3] = crc << 32 | size;
        stored++;
    }
    PyBuffer_Release(&view);
    return PyLong_FromSsize_t(stored);
}

static PyObject *k_canonical(PyObject *module, PyObject *path) {
    (void)module;
    Py_ssize_t len;
    return PyBool_FromLong(canonical(path, &len) != NULL);
}

/* ------------------------------------------------------------- writing files -------- */
/* write_files: the extraction's per-file loop (barecat/kernels/python_writes.py is the
 * reference and says what it owns). The rows are unpacked with the lock held; then every
 * read, check and system call runs with it released; then the rows handed back are named.
 * IndexRows.write: the same loop over rows the core reads from the index itself, by
 * SQLite's C interface (read_rows, further below). */

#define ROW_COLUMNS 9
#define MAX_FD 0x7FFFFFFFLL
#define MAX_U32 0xFFFFFFFFLL

/* A row's values, from a tuple or from SQLite: its path (UTF-8 surely in normal form,
 * NUL-terminated, or NULL) and, for the columns after it, an int (kind 1, in v), NULL or
 * None (kind 0), or anything else (kind -1: an int beyond 64 bits included). */
typedef struct {
    const char *path;
    Py_ssize_t n;
    signed char kind[ROW_COLUMNS];
    long long v[ROW_COLUMNS];
} Values;

enum { C_SHARD = 1, C_OFFSET, C_SIZE, C_CRC, C_MODE, C_UID, C_GID, C_MTIME };

static int is_in(const Values *x, int c, long long low, long long high) {
    return x->kind[c] == 1 && x->v[c] >= low && x->v[c] <= high;
}

static int none_or_in(const Values *x, int c, long long low, long long high) {
    return x->kind[c] == 0 || is_in(x, c, low, high);
}

/* The values of a 9-tuple of Python objects (the path's UTF-8 is the str's own). */
static void values_of_tuple(PyObject *row, Values *x) {
    x->path = canonical(PyTuple_GetItem(row, 0), &x->n);
    for (int c = 1; c < ROW_COLUMNS; c++) {
        PyObject *o = PyTuple_GetItem(row, c);
        x->kind[c] = o == Py_None ? 0 : exact_in(o, INT64_MIN, INT64_MAX, &x->v[c]) ? 1 : -1;
    }
}

typedef struct {
    const char *path;    /* UTF-8, NUL-terminated, or NULL: hand it back */
    int fd;              /* of its shard */
    long long shard;
    long long offset;
    Py_ssize_t size;
    uint32_t crc;
    unsigned int bits;   /* asked of open */
    long long wanted;    /* fchmod to this after, or -1 */
    long long uid, gid;  /* fchown to these, or -1 */
    long long mtime_ns;
    int has_mtime;
    long long mode, row_uid, row_gid; /* as the row has them (-1: None), for names' checks */
    int placed;                       /* its shard and offset are ints (in place) */
    long long place_shard, place_offset;
    Py_ssize_t names; /* rows at its place from it (1: alone); 0 for its later names */
} Row;

/* What dirs holds for the directory of a path (p, n: its UTF-8): the group files get
 * there, -2 for what is no such group, -4 when dirs does not hold it (not made safe: hand
 * it back), -3 for an error. `cached` keeps the last directory looked up (its UTF-8 bytes
 * and answer). */
typedef struct {
    const char *parent;
    Py_ssize_t len;
    long long gid;
} GroupCache;

static long long group_of(PyObject *groups, const char *p, Py_ssize_t n, GroupCache *cached) {
    Py_ssize_t len = 0;
    for (Py_ssize_t i = n; i > 0; i--) {
        if (p[i - 1] == '/') {
            len = i - 1;
            break;
        }
    }
    if (cached->parent != NULL && cached->len == len && memcmp(cached->parent, p, (size_t)len) == 0) {
        return cached->gid;
    }
    PyObject *key = PyUnicode_DecodeUTF8(p, len, "strict"); /* (p: checked UTF-8) */
    if (key == NULL) {
        return -3;
    }
    PyObject *got = PyDict_GetItemWithError(groups, key);
    Py_DECREF(key);
    if (got == NULL && PyErr_Occurred()) {
        return -3;
    }
    long long gid = -4;
    if (got != NULL && !exact_in(got, 0, MAX_U32, &gid)) {
        gid = -2;
    }
    cached->parent = p;
    cached->len = len;
    cached->gid = gid;
    return gid;
}

/* The descriptor fds holds for a shard: 1 (in *fd), 0 for none that is a descriptor, -1
 * for an error. `cached` keeps the last shard looked up. */
typedef struct {
    long long shard; /* -1: none yet */
    long long fd;
} ShardCache;

static int fd_of(PyObject *fds, long long shard, ShardCache *cached, long long *fd) {
    if (cached->shard != shard) {
        PyObject *key = PyLong_FromLongLong(shard);
        if (key == NULL) {
            return -1;
        }
        PyObject *got = PyDict_GetItemWithError(fds, key);
        Py_DECREF(key);
        if (got == NULL && PyErr_Occurred()) {
            return -1;
        }
        cached->shard = shard;
        if (got == NULL || !exact_in(got, 0, MAX_FD, &cached->fd)) {
            cached->fd = -1;
        }
    }
    *fd = cached->fd;
    return cached->fd >= 0;
}

/* What write_files and IndexRows.write are given besides the rows. */
typedef struct {
    PyObject *fds, *dirs;
    long long limit, umask, euid; /* euid -1: owners left as created */
    GroupCache groups;
    ShardCache shards;
} Plans;

/* Plan a row for writing (r->path NULL: hand it back); -1 with an error set. */
static int plan_row(const Values *x, Plans *g, Row *r) {
    r->path = NULL;
    r->placed = x->kind[C_SHARD] == 1 && x->kind[C_OFFSET] == 1;
    r->place_shard = x->v[C_SHARD];
    r->place_offset = x->v[C_OFFSET];
    if (x->path == NULL || !is_in(x, C_SHARD, 0, INT64_MAX) || !is_in(x, C_OFFSET, 0, INT64_MAX) ||
        !is_in(x, C_SIZE, 0, g->limit - 1) || !is_in(x, C_CRC, 0, MAX_U32) ||
        !none_or_in(x, C_MODE, 0, MAX_U32) || (x->kind[C_MODE] == 1 && S_ISLNK(x->v[C_MODE])) ||
        !none_or_in(x, C_UID, 0, MAX_U32 - 1) || !none_or_in(x, C_GID, 0, MAX_U32 - 1) ||
        x->kind[C_MTIME] < 0) {
        return 0;
    }
    long long there = group_of(g->dirs, x->path, x->n, &g->groups);
    if (there == -3) {
        return -1;
    }
    if (there == -4) {
        return 0;
    }
    long long fd;
    int found = fd_of(g->fds, x->v[C_SHARD], &g->shards, &fd);
    if (found <= 0) {
        return found;
    }
    long long mode = x->kind[C_MODE] ? x->v[C_MODE] : -1;
    long long uid = x->kind[C_UID] ? x->v[C_UID] : -1, gid = x->kind[C_GID] ? x->v[C_GID] : -1;
    r->fd = (int)fd;
    r->shard = x->v[C_SHARD];
    r->offset = x->v[C_OFFSET];
    r->size = (Py_ssize_t)x->v[C_SIZE];
    r->crc = (uint32_t)x->v[C_CRC];
    r->has_mtime = x->kind[C_MTIME] == 1;
    r->mtime_ns = x->v[C_MTIME];
    r->mode = mode;
    r->row_uid = uid;
    r->row_gid = gid;
    r->bits = mode < 0 ? 0666 : (unsigned int)(mode & 0777);
    long long wanted = mode < 0 ? (0666 & ~g->umask) : (mode & 07777);
    r->wanted = wanted != (long long)(r->bits & ~(unsigned int)g->umask) ? wanted : -1;
    r->uid = r->gid = -1;
    if (g->euid >= 0 && uid >= 0 && gid >= 0) {
        if (uid != g->euid || gid != there) {
            r->uid = uid;
            r->gid = gid;
        }
    }
    r->path = x->path;
    return 0;
}

/* Remove what write_one created for a row it then failed to finish. */
static void remove_made(int root, const char *path, int fd) {
    if (fd >= 0) {
        close(fd);
    }
    unlinkat(root, path, 0);
}

/* Write n bytes at `at` of fd; 0, or -1 (a write failed, or made no headway). */
static int write_at(int fd, const char *data, Py_ssize_t n, Py_ssize_t at) {
    for (Py_ssize_t done = 0; done < n;) {
        ssize_t wrote = pwrite(fd, data + done, (size_t)(n - done), (off_t)(at + done));
        if (wrote < 0 && errno == EINTR) {
            continue;
        }
        if (wrote <= 0) {
            return -1;
        }
        done += wrote;
    }
    return 0;
}

/* kernels/sparse.py's rule for what becomes a hole, again: a block of HOLE_BLOCK bytes,
 * aligned in the file, all zero, in a file of SPARSE_MIN bytes or more. */
#define HOLE_BLOCK 4096
#define SPARSE_MIN (16 * HOLE_BLOCK)

static int zero_block(const char *p) {
    static const char zeros[HOLE_BLOCK];
    return p[0] == 0 && memcmp(p, zeros, HOLE_BLOCK) == 0; /* (the first byte decides most) */
}

/* Write a new, empty file's `size` bytes, its zero blocks skipped (pwrite past them) and
 * its size set when it ends in one; 0, or -1. */
static int write_data(int fd, const char *data, Py_ssize_t size) {
    Py_ssize_t at = 0; /* the bytes before are written, or holes */
    if (size >= SPARSE_MIN) {
        for (Py_ssize_t b = 0; b + HOLE_BLOCK <= size; b += HOLE_BLOCK) {
            if (zero_block(data + b)) {
                if (write_at(fd, data + at, b - at, at) < 0) {
                    return -1;
                }
                at = b + HOLE_BLOCK;
            }
        }
    }
    if (at > 0 && at == size) {
        return ftruncate(fd, (off_t)size) == 0 ? 0 : -1;
    }
    return write_at(fd, data + at, size - at, at);
}

/* Create, write, own, chmod, touch and close one file; 0, or -1 (nothing left of it). */
static int write_one(int root, const Row *r, const char *data) {
    int fd;
    do {
        fd = openat(root, r->path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, r->bits);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        return -1;
    }
    if (write_data(fd, data, r->size) < 0) {
        remove_made(root, r->path, fd);
        return -1;
    }
    int bad = (r->uid >= 0 && fchown(fd, (uid_t)r->uid, (gid_t)r->gid) != 0) ||
              (r->wanted >= 0 && fchmod(fd, (mode_t)r->wanted) != 0);
    if (!bad && r->has_mtime) {
        long long sec = r->mtime_ns / 1000000000, nsec = r->mtime_ns % 1000000000;
        if (nsec < 0) { /* (floor division, as Python's) */
            sec -= 1;
            nsec += 1000000000;
        }
        struct timespec times[2] = {{(time_t)sec, (long)nsec}, {(time_t)sec, (long)nsec}};
        bad = futimens(fd, times) != 0;
    }
    if (bad) {
        remove_made(root, r->path, fd);
        return -1;
    }
    if (close(fd) != 0) {
        remove_made(root, r->path, -1);
        return -1;
    }
    return 0;
}

typedef struct {
    long long shard; /* what the buffer holds: shard -1 for nothing */
    long long start, end;
} Held;

/* Whether two planned rows with bytes are names of one file: the same size, CRC32C, mode,
 * owner and mtime (BarecatFileInfo.hard_link_key: one inode cannot hold two). */
static int one_file(const Row *a, const Row *b) {
    return a->size == b->size && a->crc == b->crc && a->mode == b->mode &&
           a->row_uid == b->row_uid && a->row_gid == b->row_gid && a->has_mtime == b->has_mtime &&
           (!a->has_mtime || a->mtime_ns == b->mtime_ns);
}

/* Whether the rows plan[k:end], at one place, are the kernel's: all planned, their files
 * with bytes names of one file, their empty ones with the empty CRC32C (python_writes.py's
 * _one_file). */
static int kernels_group(const Row *plan, Py_ssize_t k, Py_ssize_t end) {
    const Row *stored = NULL;
    for (Py_ssize_t m = k; m < end; m++) {
        const Row *r = &plan[m];
        if (r->path == NULL || (r->size == 0 && r->crc != 0)) {
            return 0;
        }
        if (r->size > 0) {
            if (stored != NULL && !one_file(stored, r)) {
                return 0;
            }
            stored = stored != NULL ? stored : r;
        }
    }
    return 1;
}

/* Group the planned rows by place: the first of each group gets how many rows are at its
 * place, the others 0; a group that is not the kernel's is handed back whole (every
 * path NULL). */
static void group_names(Row *plan, Py_ssize_t count) {
    for (Py_ssize_t k = 0; k < count;) {
        Py_ssize_t end = k + 1;
        while (end < count && plan[k].placed && plan[end].placed &&
               plan[end].place_shard == plan[k].place_shard &&
               plan[end].place_offset == plan[k].place_offset) {
            end++;
        }
        int whole = kernels_group(plan, k, end);
        for (Py_ssize_t m = k; m < end; m++) {
            plan[m].names = m == k ? end - k : 0;
            if (!whole) {
                plan[m].path = NULL;
            }
        }
        k = end;
    }
}

/* The row of a group whose bytes are read: its first file with bytes, else its first. */
static const Row *stored_row(const Row *plan, Py_ssize_t k) {
    for (Py_ssize_t m = k; m < k + plan[k].names; m++) {
        if (plan[m].size > 0) {
            return &plan[m];
        }
    }
    return &plan[k];
}

/* How many bytes to read from the stored row of the group at k (not held): up to the
 * end of the last of the planned groups after it that lie in the same shard, at or past
 * it, within `room` of it (groups handed back skipped), so that one read brings a run of
 * neighbours and nothing past them. */
static Py_ssize_t run_length(const Row *plan, Py_ssize_t k, Py_ssize_t count, Py_ssize_t room) {
    const Row *r = stored_row(plan, k);
    long long start = r->offset, end = r->offset + r->size; /* (start <= INT64_MAX - room) */
    for (Py_ssize_t m = k + plan[k].names; m < count; m += plan[m].names) {
        const Row *s = stored_row(plan, m);
        if (s->path == NULL || s->size == 0) {
            continue;
        }
        if (s->shard != r->shard || s->offset < start || s->offset - start > room - s->size) {
            break;
        }
        end = s->offset + s->size > end ? s->offset + s->size : end;
    }
    return (Py_ssize_t)(end - start);
}

/* The bytes of the group at k (its stored row's), checked, from the buffer (a run read
 * anew where needed: run_length), or NULL. */
static const char *group_bytes(const Row *plan, Py_ssize_t k, Py_ssize_t count, char *buf,
                               Py_ssize_t room, Held *held) {
    const Row *r = stored_row(plan, k);
    if (r->path == NULL) {
        return NULL;
    }
    if (r->size == 0) {
        return r->crc == 0 ? buf : NULL;
    }
    if (held->shard != r->shard || !(held->start <= r->offset && r->offset <= held->end - r->size)) {
        if (r->offset > INT64_MAX - room) {
            return NULL;
        }
        Py_ssize_t want = run_length(plan, k, count, room);
        ssize_t got;
        do {
            got = pread(r->fd, buf, (size_t)want, (off_t)r->offset);
        } while (got < 0 && errno == EINTR);
        if (got < 0) {
            held->shard = -1;
            return NULL;
        }
        held->shard = r->shard;
        held->start = r->offset;
        held->end = r->offset + got;
        if (held->end - r->size < r->offset) {
            return NULL;
        }
    }
    const char *data = buf + (r->offset - held->start);
    return crc32c_of(0, (const unsigned char *)data, (size_t)r->size) == r->crc ? data : NULL;
}

/* Write the rows of the group at k, in order: each empty file, the first file with bytes
 * (`data`), each later name of it as a hard link; 0, or -1 with every name made removed. */
static int write_names(int root, const Row *plan, Py_ssize_t k, const char *data) {
    const char *first = NULL;
    for (Py_ssize_t m = k; m < k + plan[k].names; m++) {
        const Row *r = &plan[m];
        int bad;
        if (first == NULL || r->size == 0) {
            bad = write_one(root, r, data);
            first = !bad && r->size > 0 ? r->path : first;
        } else {
            bad = linkat(root, first, root, r->path, 0) != 0;
        }
        if (bad) {
            for (Py_ssize_t made = k; made < m; made++) {
                unlinkat(root, plan[made].path, 0);
            }
            return -1;
        }
    }
    return 0;
}

/* Write the grouped plan's rows, the lock released: done[k] set for each row written;
 * adds the files written and their bytes. */
static void write_planned(int root, const Row *plan, Py_ssize_t count, Py_buffer *view,
                          char *done, long long *files, long long *written) {
    long long f = 0, w = 0;
    Py_BEGIN_ALLOW_THREADS
    Held held = {-1, 0, 0};
    for (Py_ssize_t k = 0; k < count; k += plan[k].names) {
        const char *data = group_bytes(plan, k, count, view->buf, view->len, &held);
        if (data != NULL && write_names(root, plan, k, data) == 0) {
            memset(done + k, 1, (size_t)plan[k].names);
            f += plan[k].names;
            w += stored_row(plan, k)->size;
        }
    }
    Py_END_ALLOW_THREADS
    *files += f;
    *written += w;
}

/* The checks of write_files' arguments (args: root, fds, rows, buffer, limit, umask,
 * dirs, euid; rows NULL for IndexRows.write), in the order python_writes.py makes
 * them; then the plans' settings and the buffer's view. 0, or -1 with an error set. */
static int write_arguments(PyObject *const *args, Plans *g, Py_buffer *view, int *root) {
    if (!PyDict_Check(args[1]) || (args[2] != NULL && !PyList_Check(args[2]))) {
        PyErr_SetString(PyExc_TypeError, "write_files(root, fds: dict, rows: list, buffer, limit, umask, dirs, euid)");
        return -1;
    }
    if (!PyByteArray_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "buffer: a bytearray");
        return -1;
    }
    if (!PyDict_Check(args[6])) {
        PyErr_SetString(PyExc_TypeError, "dirs: a dict");
        return -1;
    }
    const int at[3] = {0, 4, 5};
    const long long most[3] = {MAX_FD, INT64_MAX, 07777};
    long long numbers[3];
    for (int i = 0; i < 3; i++) {
        if (!PyLong_CheckExact(args[at[i]])) {
            PyErr_SetString(PyExc_TypeError, "root, limit and umask are ints");
            return -1;
        }
        if (!exact_in(args[at[i]], 0, most[i], &numbers[i])) {
            PyErr_SetString(PyExc_ValueError, "root, limit or umask out of range");
            return -1;
        }
    }
    g->euid = -1;
    if (args[7] != Py_None && !exact_in(args[7], 0, MAX_U32, &g->euid)) {
        PyErr_SetString(PyExc_ValueError, "euid: None or an int in 0..2**32-1");
        return -1;
    }
    if (PyObject_GetBuffer(args[3], view, PyBUF_WRITABLE) < 0) { /* (no resize meanwhile) */
        return -1;
    }
    *root = (int)numbers[0];
    g->fds = args[1];
    g->dirs = args[6];
    g->limit = numbers[1] < (long long)view->len + 1 ? numbers[1] : (long long)view->len + 1;
    g->umask = numbers[2];
    return 0;
}

/* The caches of a batch's plans start empty (a callback between batches may change the
 * dicts they remember). */
static void fresh_caches(Plans *g) {
    g->groups.parent = NULL;
    g->shards.shard = -1;
}

/* write_files(root, fds, rows, buffer, limit, umask, dirs, euid): see python_writes.py. */
static PyObject *k_write_files(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError, "write_files(root, fds, rows, buffer, limit, umask, dirs, euid)");
        return NULL;
    }
    Plans g;
    Py_buffer view;
    int root;
    if (write_arguments(args, &g, &view, &root) < 0) {
        return NULL;
    }
    PyObject *rows = PySequence_Tuple(args[2]); /* (held: the list may change meanwhile) */
    if (rows == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    Py_ssize_t count = PyTuple_Size(rows);
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *row = PyTuple_GetItem(rows, k);
        if (!PyTuple_Check(row) || PyTuple_Size(row) != ROW_COLUMNS) {
            Py_DECREF(rows);
            PyBuffer_Release(&view);
            PyErr_SetString(PyExc_TypeError, "a row is (path, shard, offset, size, crc32c, mode, uid, gid, mtime_ns)");
            return NULL;
        }
    }
    fresh_caches(&g);
    Row *plan = PyMem_Calloc((size_t)(count ? count : 1), sizeof(Row));
    char *done = PyMem_Calloc((size_t)(count ? count : 1), 1);
    PyObject *out = NULL;
    if (plan == NULL || done == NULL) {
        PyErr_NoMemory();
        goto finish;
    }
    for (Py_ssize_t k = 0; k < count; k++) {
        Values x;
        values_of_tuple(PyTuple_GetItem(rows, k), &x);
        if (plan_row(&x, &g, &plan[k]) < 0) {
            goto finish;
        }
    }
    group_names(plan, count);
    long long files = 0, written = 0;
    write_planned(root, plan, count, &view, done, &files, &written);
    PyObject *left = PyList_New(0);
    for (Py_ssize_t k = 0; left != NULL && k < count; k++) {
        if (!done[k]) {
            PyObject *index = PyLong_FromSsize_t(k);
            if (index == NULL || PyList_Append(left, index) < 0) {
                Py_CLEAR(left);
            }
            Py_XDECREF(index);
        }
    }
    out = left == NULL ? NULL : Py_BuildValue("(NLL)", left, files, written);
finish:
    PyMem_Free(plan);
    PyMem_Free(done);
    PyBuffer_Release(&view);
    Py_DECREF(rows);
    return out;
}

/* ------------------------------------------------- the index's rows, by SQLite -------- */
/* read_rows reads the files' rows with SQLite's C interface: the very library
 * Python's sqlite3 module runs (found through that module's own shared object, so both
 * share one SQLite and its bookkeeping of the file's locks), its functions looked up once.
 * Where it cannot be found (a Python whose SQLite is not a shared library, a platform
 * without dlopen), read_rows answers None and the caller reads the rows itself. */

typedef struct sqlite3 sqlite3;
typedef struct sqlite3_stmt sqlite3_stmt;
#define SQ_OPEN_READONLY 0x00000001
#define SQ_NOMEM 7
#define SQ_CORRUPT 11
#define SQ_NOTADB 26
#define SQ_ROW 100
#define SQ_DONE 101
#define SQ_INTEGER 1
#define SQ_FLOAT 2
#define SQ_TEXT 3
#define SQ_BLOB 4
#define SQ_NULL 5

static struct {
    int (*open_v2)(const char *, sqlite3 **, int, const char *);
    int (*close)(sqlite3 *);
    int (*busy_timeout)(sqlite3 *, int);
    int (*prepare_v2)(sqlite3 *, const char *, int, sqlite3_stmt **, const char **);
    int (*step)(sqlite3_stmt *);
    int (*finalize)(sqlite3_stmt *);
    int (*column_count)(sqlite3_stmt *);
    int (*column_type)(sqlite3_stmt *, int);
    long long (*column_int64)(sqlite3_stmt *, int);
    double (*column_double)(sqlite3_stmt *, int);
    const void *(*column_blob)(sqlite3_stmt *, int);
    const unsigned char *(*column_text)(sqlite3_stmt *, int);
    int (*column_bytes)(sqlite3_stmt *, int);
    const char *(*errmsg)(sqlite3 *);
} sq;
static const char *const sq_names[] = {
    "sqlite3_open_v2", "sqlite3_close", "sqlite3_busy_timeout", "sqlite3_prepare_v2",
    "sqlite3_step", "sqlite3_finalize", "sqlite3_column_count", "sqlite3_column_type",
    "sqlite3_column_int64", "sqlite3_column_double", "sqlite3_column_blob",
    "sqlite3_column_text", "sqlite3_column_bytes", "sqlite3_errmsg",
};
static int sq_found; /* 0: not looked for yet; 1: found; -1: not to be had */

/* Whether SQLite's functions are at hand (looked up the first time, the lock held). */
static int sqlite_at_hand(void) {
    if (sq_found != 0) {
        return sq_found > 0;
    }
    sq_found = -1;
    PyObject *module = PyImport_ImportModule("_sqlite3");
    PyObject *file = module == NULL ? NULL : PyObject_GetAttrString(module, "__file__");
    const char *path = file != NULL && PyUnicode_Check(file) ? PyUnicode_AsUTF8AndSize(file, NULL) : NULL;
    void *lib = path == NULL ? NULL : dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    Py_XDECREF(file);
    Py_XDECREF(module);
    PyErr_Clear();
    if (lib == NULL) {
        return 0;
    }
    void **slot = (void **)&sq;
    for (size_t i = 0; i < sizeof(sq_names) / sizeof(sq_names[0]); i++) {
        slot[i] = dlsym(lib, sq_names[i]); /* (the module's own, or a library it needs) */
        if (slot[i] == NULL) {
            return 0;
        }
    }
    sq_found = 1;
    return 1;
}

/* Every row of a statement, stepped with the lock released into memory of its own: per
 * row, per column, its SQLite type and value (an int, a double's bits, or where its bytes
 * start in the arena, each NUL-terminated and preceded by its length). */
typedef struct {
    unsigned char type[ROW_COLUMNS];
    long long v[ROW_COLUMNS];
} Raw;

typedef struct {
    Raw *rows;
    Py_ssize_t count;
    size_t room; /* rows the block holds */
    char *arena;
    size_t used, size;
    int rc;        /* SQ_DONE, an SQLite error code, or -1 for no memory */
    char why[200]; /* SQLite's message of an error */
} Stepped;

static int grow(void **block, size_t *room, size_t need, size_t unit) {
    if (need <= *room) {
        return 0;
    }
    size_t more = *room ? *room : 1024;
    while (more < need) {
        more *= 2;
    }
    void *bigger = realloc(*block, more * unit);
    if (bigger == NULL) {
        return -1;
    }
    *block = bigger;
    *room = more;
    return 0;
}

static void step_all(sqlite3 *db, sqlite3_stmt *st, Stepped *s) {
    for (;;) {
        int rc = sq.step(st);
        if (rc != SQ_ROW) {
            s->rc = rc;
            if (rc != SQ_DONE) {
                snprintf(s->why, sizeof(s->why), "%s", sq.errmsg(db));
            }
            return;
        }
        if (grow((void **)&s->rows, &s->room, (size_t)s->count + 1, sizeof(Raw)) < 0) {
            s->rc = -1;
            return;
        }
        Raw *raw = &s->rows[s->count];
        for (int c = 0; c < ROW_COLUMNS; c++) {
            int type = sq.column_type(st, c);
            raw->type[c] = (unsigned char)type;
            if (type == SQ_INTEGER) {
                raw->v[c] = sq.column_int64(st, c);
            } else if (type == SQ_FLOAT) {
                double d = sq.column_double(st, c);
                memcpy(&raw->v[c], &d, sizeof(d));
            } else if (type == SQ_TEXT || type == SQ_BLOB) {
                const char *p = type == SQ_TEXT ? (const char *)sq.column_text(st, c)
                                                : (const char *)sq.column_blob(st, c);
                long long n = sq.column_bytes(st, c);
                size_t at = (s->used + 7) & ~(size_t)7; /* (the length aligned) */
                if (grow((void **)&s->arena, &s->size, at + 8 + (size_t)n + 1, 1) < 0) {
                    s->rc = -1;
                    return;
                }
                memcpy(s->arena + at, &n, 8);
                if (n > 0) {
                    memcpy(s->arena + at + 8, p, (size_t)n);
                }
                s->arena[at + 8 + (size_t)n] = 0;
                s->used = at + 8 + (size_t)n + 1;
                raw->v[c] = (long long)at;
            } else {
                raw->v[c] = 0;
            }
        }
        s->count++;
    }
}

/* The bytes (and their length) of a TEXT or BLOB column of a stepped row. */
static const char *raw_bytes(const Stepped *s, const Raw *raw, int c, Py_ssize_t *n) {
    long long len;
    memcpy(&len, s->arena + raw->v[c], 8);
    *n = (Py_ssize_t)len;
    return s->arena + raw->v[c] + 8;
}

/* Whether n bytes are UTF-8 as Python's strict decoder takes it (no overlong forms, no
 * surrogates, nothing past U+10FFFF). */
static int utf8_valid(const unsigned char *p, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        unsigned char b = p[i];
        if (b < 0x80) {
            i++;
            continue;
        }
        int more;
        unsigned int low = 0x80, high = 0xBF; /* the range of the second byte */
        if (b >= 0xC2 && b <= 0xDF) {
            more = 1;
        } else if (b >= 0xE0 && b <= 0xEF) {
            more = 2;
            low = b == 0xE0 ? 0xA0 : 0x80;
            high = b == 0xED ? 0x9F : 0xBF;
        } else if (b >= 0xF0 && b <= 0xF4) {
            more = 3;
            low = b == 0xF0 ? 0x90 : 0x80;
            high = b == 0xF4 ? 0x8F : 0xBF;
        } else {
            return 0;
        }
        if (n - i <= more || p[i + 1] < low || p[i + 1] > high) {
            return 0;
        }
        for (int k = 2; k <= more; k++) {
            if ((p[i + k] & 0xC0) != 0x80) {
                return 0;
            }
        }
        i += more + 1;
    }
    return 1;
}

/* The values of a stepped row (its path surely in normal form only if TEXT in UTF-8). */
static void values_of_raw(const Stepped *s, const Raw *raw, Values *x) {
    x->path = NULL;
    if (raw->type[0] == SQ_TEXT) {
        const char *p = raw_bytes(s, raw, 0, &x->n);
        if (utf8_valid((const unsigned char *)p, x->n) && canonical_bytes(p, x->n)) {
            x->path = p;
        }
    }
    for (int c = 1; c < ROW_COLUMNS; c++) {
        x->kind[c] = raw->type[c] == SQ_INTEGER ? 1 : raw->type[c] == SQ_NULL ? 0 : -1;
        x->v[c] = raw->v[c];
    }
}

/* A stepped row as Python's sqlite3 module gives it: a 9-tuple of int, float, str (text
 * that is not UTF-8 raises sqlite3.OperationalError, as the module does), bytes or None. */
static PyObject *raw_tuple(const Stepped *s, const Raw *raw) {
    PyObject *row = PyTuple_New(ROW_COLUMNS);
    for (int c = 0; row != NULL && c < ROW_COLUMNS; c++) {
        PyObject *o;
        Py_ssize_t n;
        double d;
        switch (raw->type[c]) {
        case SQ_INTEGER:
            o = PyLong_FromLongLong(raw->v[c]);
            break;
        case SQ_FLOAT:
            memcpy(&d, &raw->v[c], sizeof(d));
            o = PyFloat_FromDouble(d);
            break;
        case SQ_TEXT: {
            const char *p = raw_bytes(s, raw, c, &n);
            o = PyUnicode_DecodeUTF8(p, n, "strict");
            if (o == NULL && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                PyErr_Clear();
                PyObject *sqlite3 = PyImport_ImportModule("sqlite3");
                PyObject *error = sqlite3 == NULL ? NULL : PyObject_GetAttrString(sqlite3, "OperationalError");
                if (error != NULL) {
                    PyErr_Format(error, "Could not decode to UTF-8 column %d of a file's row", c);
                }
                Py_XDECREF(error);
                Py_XDECREF(sqlite3);
            }
            break;
        }
        case SQ_BLOB: {
            const char *p = raw_bytes(s, raw, c, &n);
            o = PyBytes_FromStringAndSize(p, n);
            break;
        }
        default:
            o = Py_None;
            Py_INCREF(o);
        }
        if (o == NULL) {
            Py_CLEAR(row);
        } else {
            PyTuple_SetItem(row, c, o);
        }
    }
    return row;
}

/* Raise SQLite's error as Python's sqlite3 module would: its DatabaseError for a damaged
 * file, MemoryError, else its OperationalError. */
static void raise_sqlite(const Stepped *s) {
    if (s->rc == -1 || s->rc == SQ_NOMEM) {
        PyErr_NoMemory();
        return;
    }
    PyObject *sqlite3 = PyImport_ImportModule("sqlite3");
    const char *kind = s->rc == SQ_CORRUPT || s->rc == SQ_NOTADB ? "DatabaseError" : "OperationalError";
    PyObject *error = sqlite3 == NULL ? NULL : PyObject_GetAttrString(sqlite3, kind);
    if (error != NULL) {
        PyErr_SetString(error, s->why);
    }
    Py_XDECREF(error);
    Py_XDECREF(sqlite3);
}

/* Every row of `sql` on the index at `path`, stepped: 1, 0 where the index or statement
 * cannot be had this way (opened, prepared, nine columns), -1 with an error set. */
static int read_index(const char *path, const char *sql, Stepped *s) {
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int had = 0;
    Py_BEGIN_ALLOW_THREADS
    if (sq.open_v2(path, &db, SQ_OPEN_READONLY, NULL) == 0 && sq.busy_timeout(db, 5000) == 0 &&
        sq.prepare_v2(db, sql, -1, &st, NULL) == 0 && st != NULL &&
        sq.column_count(st) == ROW_COLUMNS) {
        had = 1;
        step_all(db, st, s);
    }
    if (st != NULL) {
        sq.finalize(st);
    }
    sq.close(db); /* (NULL: nothing done) */
    Py_END_ALLOW_THREADS
    if (had && s->rc != SQ_DONE) {
        raise_sqlite(s);
        return -1;
    }
    return had;
}

/* Where the batch from `start` ends: `batch` rows on, moved past the rows at the last
 * one's place (a file's names go in one batch, where they are seen together). */
static Py_ssize_t batch_end(const Stepped *s, Py_ssize_t start, Py_ssize_t batch) {
    Py_ssize_t end = s->count - start > batch ? start + batch : s->count;
    while (end < s->count) {
        const Raw *a = &s->rows[end - 1], *b = &s->rows[end];
        if (a->type[1] != SQ_INTEGER || a->type[2] != SQ_INTEGER || b->type[1] != SQ_INTEGER ||
            b->type[2] != SQ_INTEGER || a->v[1] != b->v[1] || a->v[2] != b->v[2]) {
            break;
        }
        end++;
    }
    return end;
}

/* Write the stepped rows in batches (progress told to on_files between, and an interrupt
 * taken); the rows not written appended to `left` as tuples. 0, or -1 with an error. */
static int write_stepped(const Stepped *s, int root, Plans *g, Py_buffer *view,
                         PyObject *on_files, Py_ssize_t batch, PyObject *left,
                         long long *files, long long *written) {
    Py_ssize_t most = s->count < batch ? s->count : batch;
    Row *plan = NULL;
    char *done = NULL;
    int failed = -1;
    for (Py_ssize_t start = 0; start < s->count;) {
        Py_ssize_t end = batch_end(s, start, batch), count = end - start;
        if (count > most || plan == NULL) {
            most = count > most ? count : most;
            PyMem_Free(plan);
            PyMem_Free(done);
            plan = PyMem_Calloc((size_t)most, sizeof(Row));
            done = PyMem_Calloc((size_t)most, 1);
            if (plan == NULL || done == NULL) {
                PyErr_NoMemory();
                goto finish;
            }
        }
        memset(done, 0, (size_t)count);
        fresh_caches(g);
        for (Py_ssize_t k = 0; k < count; k++) {
            Values x;
            values_of_raw(s, &s->rows[start + k], &x);
            if (plan_row(&x, g, &plan[k]) < 0) {
                goto finish;
            }
        }
        group_names(plan, count);
        long long f = 0, w = 0;
        write_planned(root, plan, count, view, done, &f, &w);
        *files += f;
        *written += w;
        for (Py_ssize_t k = 0; k < count; k++) {
            if (!done[k]) {
                PyObject *row = raw_tuple(s, &s->rows[start + k]);
                int bad = row == NULL || PyList_Append(left, row) < 0;
                Py_XDECREF(row);
                if (bad) {
                    goto finish;
                }
            }
        }
        if (f > 0 && on_files != Py_None) {
            PyObject *said = PyObject_CallFunction(on_files, "LL", f, w);
            if (said == NULL) {
                goto finish;
            }
            Py_DECREF(said);
        }
        if (PyErr_CheckSignals() < 0) {
            goto finish;
        }
        start = end;
    }
    failed = 0;
finish:
    PyMem_Free(plan);
    PyMem_Free(done);
    return failed;
}

/* IndexRows: every file's row, as read_rows stepped them (the arena freed with it). */
typedef struct {
    PyObject_HEAD
    Stepped s;
} IndexRows;

static PyObject *rows_type; /* IndexRows, made at the module's start */

static void rows_dealloc(PyObject *self_obj) {
    IndexRows *self = (IndexRows *)self_obj;
    free(self->s.rows);
    free(self->s.arena);
    PyTypeObject *type = Py_TYPE(self_obj);
    freefunc free_self = (freefunc)PyType_GetSlot(type, Py_tp_free);
    free_self(self_obj);
    Py_DECREF(type);
}

static Py_ssize_t rows_length(PyObject *self_obj) {
    return ((IndexRows *)self_obj)->s.count;
}

/* IndexRows.odd(): the rows whose path is not surely in normal form, as tuples, in order. */
static PyObject *rows_odd(PyObject *self_obj, PyObject *unused) {
    (void)unused;
    const Stepped *s = &((IndexRows *)self_obj)->s;
    PyObject *odd = PyList_New(0);
    for (Py_ssize_t k = 0; odd != NULL && k < s->count; k++) {
        Values x;
        values_of_raw(s, &s->rows[k], &x);
        if (x.path == NULL) {
            PyObject *row = raw_tuple(s, &s->rows[k]);
            if (row == NULL || PyList_Append(odd, row) < 0) {
                Py_CLEAR(odd);
            }
            Py_XDECREF(row);
        }
    }
    return odd;
}

/* IndexRows.write(root, fds, buffer, limit, umask, dirs, euid, on_files, batch): see
 * python_writes.py's read_rows. */
static PyObject *rows_write(PyObject *self_obj, PyObject *const *args, Py_ssize_t nargs) {
    long long batch;
    if (nargs != 9 || (args[7] != Py_None && !PyCallable_Check(args[7]))) {
        PyErr_SetString(PyExc_TypeError, "write(root, fds, buffer, limit, umask, dirs, euid, on_files: callable or None, batch)");
        return NULL;
    }
    if (!exact_in(args[8], 1, PY_SSIZE_T_MAX, &batch)) {
        PyErr_SetString(PyExc_ValueError, "batch: an int of 1 or more");
        return NULL;
    }
    PyObject *const given[8] = {args[0], args[1], NULL, args[2], args[3], args[4], args[5], args[6]};
    Plans g;
    Py_buffer view;
    int root;
    if (write_arguments(given, &g, &view, &root) < 0) {
        return NULL;
    }
    PyObject *out = NULL, *left = PyList_New(0);
    long long files = 0, written = 0;
    if (left != NULL && write_stepped(&((IndexRows *)self_obj)->s, root, &g, &view, args[7],
                                      (Py_ssize_t)batch, left, &files, &written) == 0) {
        out = Py_BuildValue("(OLL)", left, files, written);
    }
    Py_XDECREF(left);
    PyBuffer_Release(&view);
    return out;
}

static PyMethodDef rows_methods[] = {
    {"odd", rows_odd, METH_NOARGS, "odd(): the rows whose path is not surely in normal form."},
    {"write", (PyCFunction)(void (*)(void))rows_write, METH_FASTCALL,
     "write(root, fds, buffer, limit, umask, dirs, euid, on_files, batch): write_files over "
     "every row, batch rows at a time; (left rows, files, bytes)."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot rows_slots[] = {
    {Py_tp_dealloc, (void *)rows_dealloc},
    {Py_tp_methods, rows_methods},
    {Py_sq_length, (void *)rows_length},
    {Py_tp_doc, "IndexRows: every row of a statement on an index, read by SQLite in the core "
                "(read_rows makes them)."},
    {0, NULL},
};

static PyType_Spec rows_spec = {
    "barecat.kernels._compiled.IndexRows", sizeof(IndexRows), 0, Py_TPFLAGS_DEFAULT, rows_slots,
};

/* read_rows(index, sql): see python_writes.py. */
static PyObject *k_read_rows(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 2 || !PyUnicode_Check(args[0]) || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "read_rows(index: str, sql: str)");
        return NULL;
    }
    const char *path = PyUnicode_AsUTF8AndSize(args[0], NULL);
    const char *sql = path == NULL ? NULL : PyUnicode_AsUTF8AndSize(args[1], NULL);
    PyErr_Clear(); /* (what Python cannot encode: the caller reads the rows itself) */
    if (sql == NULL || !sqlite_at_hand()) {
        Py_RETURN_NONE;
    }
    allocfunc alloc = (allocfunc)PyType_GetSlot((PyTypeObject *)rows_type, Py_tp_alloc);
    IndexRows *rows = (IndexRows *)alloc((PyTypeObject *)rows_type, 0);
    if (rows == NULL) {
        return NULL;
    }
    memset(&rows->s, 0, sizeof(rows->s));
    int had = read_index(path, sql, &rows->s);
    if (had <= 0) {
        Py_DECREF(rows);
        if (had == 0) {
            Py_RETURN_NONE;
        }
        return NULL;
    }
    return (PyObject *)rows;
}

/* ------------------------------------------------------------------ module -------- */

static PyMethodDef module_methods[] = {
    {"crc32c", (PyCFunction)(void (*)(void))k_crc32c, METH_FASTCALL | METH_KEYWORDS,
     "crc32c(data, value=0): the CRC32C of a bytes-like object, continuing from value."},
    {"_crc32c_portable", (PyCFunction)(void (*)(void))k_crc32c_portable,
     METH_FASTCALL | METH_KEYWORDS,
     "_crc32c_portable(data, value=0): crc32c with the portable tables whatever the CPU has "
     "(for the tests of the path CPUs without a CRC instruction take)."},
    {"canonical", (PyCFunction)k_canonical, METH_O,
     "canonical(path): whether path is surely in normal form (see barecat/kernels/python.py)."},
    {"fill_table", (PyCFunction)(void (*)(void))k_fill_table, METH_FASTCALL,
     "fill_table(slots, paths, rows, hash, stored): store rows in a lookup table being built."},
    {"read_checked", (PyCFunction)(void (*)(void))k_read_checked, METH_FASTCALL,
     "read_checked(fd, offset, size, crc): the bytes, checked, or None for the careful path."},
    {"write_files", (PyCFunction)(void (*)(void))k_write_files, METH_FASTCALL,
     "write_files(root, fds, rows, buffer, limit, umask, dirs, euid): the plain files among "
     "rows written below root; (left, files, bytes) (see barecat/kernels/python_writes.py)."},
    {"read_rows", (PyCFunction)(void (*)(void))k_read_rows, METH_FASTCALL,
     "read_rows(index, sql): every row sql gives on the index file, read by SQLite in the "
     "core, as IndexRows; None where it cannot (see barecat/kernels/python_writes.py)."},
    {"read_each", (PyCFunction)(void (*)(void))k_read_each, METH_FASTCALL,
     "read_each(fds, addresses, stop_on_wait=False): read_checked of each address, its fd "
     "by shard; with stop_on_wait, None from a read that would wait on."},
    {NULL, NULL, 0, NULL},
};

static int module_exec(PyObject *module) {
    build_tables();
    tuple_new = (newfunc)PyType_GetSlot(&PyTuple_Type, Py_tp_new);
    have_hardware = detect_hardware();
    PyObject *type = PyType_FromSpec(&table_spec);
    if (type == NULL || PyModule_AddObject(module, "AddressTable", type) < 0) {
        Py_XDECREF(type);
        return -1;
    }
    rows_type = PyType_FromSpec(&rows_spec);
    if (rows_type == NULL || PyModule_AddObjectRef(module, "IndexRows", rows_type) < 0) {
        return -1;
    }
    const char *crc = have_hardware ?
#if defined(BARECAT_X86)
        "sse4.2"
#else
        "armv8-crc"
#endif
        : "portable";
    return PyModule_AddStringConstant(module, "CRC32C_INSTRUCTIONS", crc);
}

static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, (void *)module_exec},
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_compiled", "barecat's compiled kernels (see barecat/kernels).",
    0, module_methods, module_slots, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__compiled(void) { return PyModuleDef_Init(&module_def); }
