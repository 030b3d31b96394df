/*
 * fakenvml.c - a scripted stand-in for libnvidia-ml.so.1, for tests only.
 *
 * Implements the subset of the NVML C API that pynvml and gpumon's NVML source
 * call. Behaviour comes from a scenario file named in FAKENVML_SCRIPT (format in
 * docs/nvml.md). Time is seconds since the first successful nvmlInit, read from
 * the real clock, or from the file named in FAKENVML_CLOCK (a decimal number of
 * seconds) so that a test can step time deterministically.
 *
 * FAKENVML_COSTS=h100 makes every call burn the thread CPU time the same call
 * cost on a real H100 (median of tests/fakenvml/h100/nvml-call-costs.txt and
 * gpm.txt, copied into COSTS below): a busy loop on CLOCK_THREAD_CPUTIME_ID, not
 * a sleep, so a monitor's CPU use on the fake is what it would be on the H100.
 *
 * Build variants: -DNO_V3 drops the *_v3 process-list symbols, -DNO_V2 drops the
 * *_v2 ones, -DNO_MEMINFO_V2 drops nvmlDeviceGetMemoryInfo_v2 and
 * -DNO_TEMPERATURE_V drops nvmlDeviceGetTemperatureV, so that dlsym fails as it
 * does with an older driver.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

typedef int nvmlReturn_t;
typedef struct device *nvmlDevice_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_UNKNOWN = 999,
};

static const struct {
    const char *name;
    int code;
    const char *text;
} ERRORS[] = {
    {"SUCCESS", 0, "Success"},
    {"UNINITIALIZED", 1, "Uninitialized"},
    {"INVALID_ARGUMENT", 2, "Invalid Argument"},
    {"NOT_SUPPORTED", 3, "Not Supported"},
    {"NO_PERMISSION", 4, "Insufficient Permissions"},
    {"ALREADY_INITIALIZED", 5, "Already Initialized"},
    {"NOT_FOUND", 6, "Not Found"},
    {"INSUFFICIENT_SIZE", 7, "Insufficient Size"},
    {"INSUFFICIENT_POWER", 8, "Insufficient External Power"},
    {"DRIVER_NOT_LOADED", 9, "Driver Not Loaded"},
    {"TIMEOUT", 10, "Timeout"},
    {"IRQ_ISSUE", 11, "Interrupt Request Issue"},
    {"LIBRARY_NOT_FOUND", 12, "NVML Shared Library Not Found"},
    {"FUNCTION_NOT_FOUND", 13, "Function Not Found"},
    {"CORRUPTED_INFOROM", 14, "Corrupted infoROM"},
    {"GPU_IS_LOST", 15, "GPU is lost"},
    {"RESET_REQUIRED", 16, "GPU requires restart"},
    {"OPERATING_SYSTEM", 17, "The operating system has blocked the request."},
    {"LIB_RM_VERSION_MISMATCH", 18, "RM has detected an NVML/RM version mismatch."},
    {"IN_USE", 19, "In use by another client"},
    {"MEMORY", 20, "Insufficient Memory"},
    {"NO_DATA", 21, "No data"},
    {"ARGUMENT_VERSION_MISMATCH", 25, "Argument version mismatch"},
    {"UNKNOWN", 999, "Unknown Error"},
};
#define N_ERRORS (sizeof(ERRORS) / sizeof(ERRORS[0]))

/* ---- scenario model ---------------------------------------------------- */

enum {
    M_GPU_UTIL, M_MEM_UTIL, M_MEM_USED, M_MEM_RESERVED, M_POWER_W, M_TEMP_C,
    M_SM_CLOCK, M_PCIE_RX, M_PCIE_TX, M_PCIE_GEN, M_PCIE_WIDTH,
    M_SM_ACTIVE, M_SM_OCCUPANCY, M_DRAM_BW, M_TENSOR, N_METRICS
};
static const char *METRIC_NAMES[N_METRICS] = {
    "gpu_util", "mem_util", "mem_used_mib", "mem_reserved_mib", "power_w", "temp_c",
    "sm_clock_mhz", "pcie_rx_bps", "pcie_tx_bps", "pcie_gen", "pcie_width",
    "sm_active_pct", "sm_occupancy_pct", "dram_bw_pct", "tensor_active_pct",
};
static const double METRIC_DEFAULTS[N_METRICS] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 16, 0, 0, 0, 0};

/* Cumulative PCIe counters start here, like a counter that ran since boot. */
#define PCIE_RX_BASE 1099511627776.0
#define PCIE_TX_BASE 549755813888.0
#define FI_PCIE_COUNT_TX_BYTES 197
#define FI_PCIE_COUNT_RX_BYTES 198
#define MAX_SM_PATTERN 16
#define MAX_UTIL_INSTANTS 64   /* the driver's per-process sample buffer, in sampling periods */
#define THROUGHPUT_WINDOW_S 0.02

#define MAX_DEVICES 8  /* an 8-GPU box (DGX, HGX) */
#define MAX_SEGMENTS 64
#define MAX_PROCS 64
#define MAX_FAULTS 64
#define MAX_ENTRIES 512

struct segment {
    double t;
    double v[N_METRICS];
};

struct proc {
    int pid;          /* explicit PID, or 0 when children_of is used */
    int children_of;  /* -1: none; 0: the process that loaded this library; else a PID */
    char args[96];    /* non-empty: every process whose arguments (argv[1:] joined by spaces) begin so */
    int under;        /* with args: > 0, only descendants of this PID */
    double mem_mib;   /* < 0: N/A (NVML_VALUE_NOT_AVAILABLE) */
    double sm_util[MAX_SM_PATTERN];  /* cycled per sampling instant; [0] < 0: no utilisation samples */
    int n_sm_util;
    double mem_util;
    int kinds;        /* bit 1 compute, bit 2 graphics */
};

struct device {
    char name[96];
    char uuid[96];
    double mem_total_mib;
    double util_period_s;
    double lost_at;   /* < 0: never */
    int gpm;          /* nvmlGpmQueryDeviceSupport says supported */
    int mig;          /* MIG mode on (nvmlDeviceGetMigMode current) */
    int counter_bits; /* width of the PCIe byte counters: 32 (valueType 1) or 64 (valueType 3) */
    double counter_step_s;  /* the counters and their timestamps advance in steps this long */
    double pcie_max_gen, pcie_max_width;  /* 0: the link at t=0 */
    int nseg;
    struct segment seg[MAX_SEGMENTS];
    int nproc;
    struct proc proc[MAX_PROCS];
};

struct fault {
    char function[80];  /* NVML symbol name, "nvmlInit", or "field:<id>" */
    int code;
    double after;
    double until;       /* the fault holds for after <= t < until */
};

struct entry {
    unsigned int pid;
    unsigned long long mem_bytes;
    const struct proc *proc;
    int kinds;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int loaded;            /* scenario parsed */
static int init_count;
static long long init_us = -1;
static char driver_version[80] = "999.99.99";
static char nvml_version[80] = "99.999.99.99";
static int cuda_driver_version = 12040;
static int ndev;
static struct device devices[MAX_DEVICES];
static int nfault;
static struct fault faults[MAX_FAULTS];
static unsigned long long last_util_timestamp_arg;
static int costs_h100;        /* FAKENVML_COSTS=h100 */

/* ---- clock ------------------------------------------------------------- */

static long long real_now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

/* Seconds since nvmlInit: from FAKENVML_CLOCK when set, else the real clock. */
static double elapsed(void) {
    const char *path = getenv("FAKENVML_CLOCK");
    if (path && *path) {
        FILE *f = fopen(path, "r");
        double t = 0;
        if (f) {
            if (fscanf(f, "%lf", &t) != 1) t = 0;
            fclose(f);
        }
        return t;
    }
    return (real_now_us() - init_us) / 1e6;
}

/* The CPU timestamp (microseconds since 1970) of scenario time t. */
static long long stamp(double t) { return init_us + llround(t * 1e6); }

/* ---- scenario parsing -------------------------------------------------- */

static int error_code(const char *s) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*s && !*end) return (int)v;
    if (strncmp(s, "NVML_ERROR_", 11) == 0) s += 11;
    for (size_t i = 0; i < N_ERRORS; i++)
        if (strcmp(ERRORS[i].name, s) == 0) return ERRORS[i].code;
    return -1;
}

static int metric_index(const char *key) {
    for (int i = 0; i < N_METRICS; i++)
        if (strcmp(METRIC_NAMES[i], key) == 0) return i;
    return -1;
}

/* Splits a line into tokens in place; "quoted strings" may contain spaces. */
static int tokenize(char *line, char **tok, int max) {
    int n = 0;
    char *p = line;
    while (*p && n < max) {
        while (isspace((unsigned char)*p)) p++;
        if (!*p || *p == '#') break;
        tok[n++] = p;
        char *w = p;
        int quoted = 0;
        while (*p && (quoted || !isspace((unsigned char)*p))) {
            if (*p == '"') {
                quoted = !quoted;
                p++;
                continue;
            }
            *w++ = *p++;
        }
        if (*p) p++;
        *w = '\0';
    }
    return n;
}

static int fail_parse(int lineno, const char *msg, const char *what) {
    fprintf(stderr, "fakenvml: scenario line %d: %s: %s\n", lineno, msg, what);
    return -1;
}

static struct device *new_device(void) {
    struct device *d = &devices[ndev++];
    memset(d, 0, sizeof(*d));
    snprintf(d->name, sizeof d->name, "Fake GPU %d", ndev - 1);
    snprintf(d->uuid, sizeof d->uuid, "GPU-fake0000-0000-0000-0000-%012d", ndev - 1);
    d->mem_total_mib = 16384;
    d->util_period_s = 0.1;
    d->lost_at = -1;
    d->counter_bits = 32;
    d->counter_step_s = 0.02;
    d->nseg = 1;
    memcpy(d->seg[0].v, METRIC_DEFAULTS, sizeof(METRIC_DEFAULTS));
    return d;
}

static int set_metric(struct segment *s, const char *key, const char *val) {
    int m = metric_index(key);
    if (m < 0) return -1;
    s->v[m] = atof(val);
    return 0;
}

static int parse_line(char *line, int lineno) {
    char *tok[64];
    int n = tokenize(line, tok, 64);
    if (n == 0) return 0;
    const char *kw = tok[0];
    if (strcmp(kw, "driver") == 0 && n == 2) {
        snprintf(driver_version, sizeof driver_version, "%s", tok[1]);
        return 0;
    }
    if (strcmp(kw, "nvml_version") == 0 && n == 2) {
        snprintf(nvml_version, sizeof nvml_version, "%s", tok[1]);
        return 0;
    }
    if (strcmp(kw, "cuda_driver") == 0 && n == 2) {
        cuda_driver_version = atoi(tok[1]);
        return 0;
    }
    if (strcmp(kw, "fail") == 0 && n >= 3 && n <= 5) {
        if (nfault == MAX_FAULTS) return fail_parse(lineno, "too many faults", kw);
        struct fault *f = &faults[nfault++];
        snprintf(f->function, sizeof f->function, "%s", tok[1]);
        f->code = error_code(tok[2]);
        if (f->code < 0) return fail_parse(lineno, "unknown error", tok[2]);
        f->after = 0;
        f->until = INFINITY;
        for (int i = 3; i < n; i++) {
            if (strncmp(tok[i], "after=", 6) == 0) f->after = atof(tok[i] + 6);
            else if (strncmp(tok[i], "until=", 6) == 0) f->until = atof(tok[i] + 6);
            else return fail_parse(lineno, "expected after=T or until=T", tok[i]);
        }
        return 0;
    }
    if (strcmp(kw, "device") == 0) {
        if (ndev == MAX_DEVICES) return fail_parse(lineno, "too many devices", kw);
        struct device *d = new_device();
        for (int i = 1; i < n; i++) {
            char *eq = strchr(tok[i], '=');
            if (!eq) return fail_parse(lineno, "expected key=value", tok[i]);
            *eq = '\0';
            const char *k = tok[i], *v = eq + 1;
            if (strcmp(k, "name") == 0) snprintf(d->name, sizeof d->name, "%s", v);
            else if (strcmp(k, "uuid") == 0) snprintf(d->uuid, sizeof d->uuid, "%s", v);
            else if (strcmp(k, "mem_total_mib") == 0) d->mem_total_mib = atof(v);
            else if (strcmp(k, "util_period_ms") == 0) d->util_period_s = atof(v) / 1000.0;
            else if (strcmp(k, "gpm") == 0) d->gpm = atoi(v);
            else if (strcmp(k, "mig") == 0) d->mig = atoi(v);
            else if (strcmp(k, "pcie_max_gen") == 0) d->pcie_max_gen = atof(v);
            else if (strcmp(k, "pcie_max_width") == 0) d->pcie_max_width = atof(v);
            else if (strcmp(k, "pcie_counter_step_ms") == 0) d->counter_step_s = atof(v) / 1000.0;
            else if (strcmp(k, "pcie_counter_bits") == 0) {
                d->counter_bits = atoi(v);
                if (d->counter_bits != 32 && d->counter_bits != 64)
                    return fail_parse(lineno, "pcie_counter_bits is 32 or 64", v);
            }
            else if (set_metric(&d->seg[0], k, v) < 0) return fail_parse(lineno, "unknown device key", k);
        }
        return 0;
    }
    if (ndev == 0) return fail_parse(lineno, "needs a device line first", kw);
    struct device *d = &devices[ndev - 1];
    if (strcmp(kw, "lost_at") == 0 && n == 2) {
        d->lost_at = atof(tok[1]);
        return 0;
    }
    if (strcmp(kw, "at") == 0 && n >= 2) {
        if (d->nseg == MAX_SEGMENTS) return fail_parse(lineno, "too many segments", kw);
        double t = atof(tok[1]);
        struct segment *prev = &d->seg[d->nseg - 1];
        if (t < prev->t) return fail_parse(lineno, "segments must be in time order", tok[1]);
        struct segment *s = t == prev->t ? prev : &d->seg[d->nseg++];
        if (s != prev) *s = *prev;
        s->t = t;
        for (int i = 2; i < n; i++) {
            char *eq = strchr(tok[i], '=');
            if (!eq) return fail_parse(lineno, "expected key=value", tok[i]);
            *eq = '\0';
            if (set_metric(s, tok[i], eq + 1) < 0) return fail_parse(lineno, "unknown metric", tok[i]);
        }
        return 0;
    }
    if (strcmp(kw, "proc") == 0) {
        if (d->nproc == MAX_PROCS) return fail_parse(lineno, "too many procs", kw);
        struct proc *p = &d->proc[d->nproc++];
        p->pid = 0;
        p->children_of = -1;
        p->args[0] = '\0';
        p->under = 0;
        p->mem_mib = 0;
        p->sm_util[0] = -1;
        p->n_sm_util = 1;
        p->mem_util = 0;
        p->kinds = 1;
        for (int i = 1; i < n; i++) {
            char *eq = strchr(tok[i], '=');
            if (!eq) return fail_parse(lineno, "expected key=value", tok[i]);
            *eq = '\0';
            const char *k = tok[i], *v = eq + 1;
            if (strcmp(k, "pid") == 0) p->pid = atoi(v);
            else if (strcmp(k, "children_of") == 0) p->children_of = strcmp(v, "self") == 0 ? 0 : atoi(v);
            else if (strcmp(k, "args") == 0) snprintf(p->args, sizeof p->args, "%s", v);
            else if (strcmp(k, "under") == 0) p->under = atoi(v);
            else if (strcmp(k, "mem_mib") == 0) p->mem_mib = strcmp(v, "na") == 0 ? -1 : atof(v);
            else if (strcmp(k, "sm_util") == 0) {
                /* a,b,c: one value per sampling instant, cycled */
                p->n_sm_util = 0;
                for (char *part = strtok((char *)v, ","); part && p->n_sm_util < MAX_SM_PATTERN;
                     part = strtok(NULL, ","))
                    p->sm_util[p->n_sm_util++] = atof(part);
                if (p->n_sm_util == 0) return fail_parse(lineno, "sm_util needs a value", k);
            }
            else if (strcmp(k, "mem_util") == 0) p->mem_util = atof(v);
            else if (strcmp(k, "type") == 0) {
                if (strcmp(v, "compute") == 0) p->kinds = 1;
                else if (strcmp(v, "graphics") == 0) p->kinds = 2;
                else if (strcmp(v, "both") == 0) p->kinds = 3;
                else return fail_parse(lineno, "type is compute, graphics or both", v);
            } else return fail_parse(lineno, "unknown proc key", k);
        }
        if (p->pid <= 0 && p->children_of < 0 && !p->args[0])
            return fail_parse(lineno, "proc needs pid=, children_of= or args=", kw);
        return 0;
    }
    return fail_parse(lineno, "unknown line", kw);
}

/* Reads the scenario once; without FAKENVML_SCRIPT there is one idle device. */
static int load_scenario(void) {
    if (loaded) return 0;
    const char *costs = getenv("FAKENVML_COSTS");
    if (costs && *costs && strcmp(costs, "off") != 0) {
        if (strcmp(costs, "h100") != 0) {
            fprintf(stderr, "fakenvml: FAKENVML_COSTS is h100 or off, not %s\n", costs);
            return -1;
        }
        costs_h100 = 1;
    }
    const char *path = getenv("FAKENVML_SCRIPT");
    if (path && *path) {
        FILE *f = fopen(path, "r");
        if (!f) {
            fprintf(stderr, "fakenvml: cannot open scenario %s\n", path);
            return -1;
        }
        char line[4096];
        int lineno = 0;
        while (fgets(line, sizeof line, f)) {
            if (parse_line(line, ++lineno) < 0) {
                fclose(f);
                return -1;
            }
        }
        fclose(f);
    } else {
        new_device();
    }
    loaded = 1;
    return 0;
}

/* ---- evaluation -------------------------------------------------------- */

static int fault_for(const char *function, double t) {
    for (int i = 0; i < nfault; i++)
        if (strcmp(faults[i].function, function) == 0 && t >= faults[i].after && t < faults[i].until)
            return faults[i].code;
    return 0;
}

static const struct segment *segment_at(const struct device *d, double t) {
    int i = 0;
    while (i + 1 < d->nseg && d->seg[i + 1].t <= t) i++;
    return &d->seg[i];
}

static double metric(const struct device *d, int m, double t) { return segment_at(d, t)->v[m]; }

/* Bytes moved since init: the integral of the piecewise-constant rate. */
static double integral(const struct device *d, int m, double t) {
    double sum = 0;
    for (int i = 0; i < d->nseg && d->seg[i].t < t; i++) {
        double end = i + 1 < d->nseg && d->seg[i + 1].t < t ? d->seg[i + 1].t : t;
        sum += d->seg[i].v[m] * (end - d->seg[i].t);
    }
    return sum;
}

static int parent_of(int pid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = '\0';
    char *close = strrchr(buf, ')');
    int ppid = -1;
    if (!close || sscanf(close + 1, " %*c %d", &ppid) != 1) return -1;
    return ppid;
}

static int add_entry(struct entry *out, int n, int pid, const struct proc *p) {
    if (n == MAX_ENTRIES) return n;
    out[n].pid = (unsigned int)pid;
    out[n].mem_bytes = p->mem_mib < 0 ? ~0ULL : (unsigned long long)llround(p->mem_mib * 1048576.0);
    out[n].proc = p;
    out[n].kinds = p->kinds;
    return n + 1;
}

/* Children of `parent` from /proc/<parent>/task/<tid>/children (every thread's); -1 if absent. */
static int children_from_tasks(int parent, struct entry *out, int n, const struct proc *p) {
    char path[96];
    snprintf(path, sizeof path, "/proc/%d/task", parent);
    DIR *dir = opendir(path);
    if (!dir) return -1;
    struct dirent *e;
    int ok = 0;
    while ((e = readdir(dir))) {
        if (!isdigit((unsigned char)e->d_name[0])) continue;
        char file[96];
        snprintf(file, sizeof file, "/proc/%d/task/%d/children", parent, atoi(e->d_name));
        FILE *f = fopen(file, "r");
        if (!f) continue;
        ok = 1;
        int pid;
        while (fscanf(f, "%d", &pid) == 1) n = add_entry(out, n, pid, p);
        fclose(f);
    }
    closedir(dir);
    return ok ? n : -1;
}

/* Children of `parent` by reading every /proc/<pid>/stat (kernels without CONFIG_PROC_CHILDREN). */
static int children_from_scan(int parent, struct entry *out, int n, const struct proc *p) {
    DIR *dir = opendir("/proc");
    if (!dir) return n;
    struct dirent *e;
    while ((e = readdir(dir))) {
        if (!isdigit((unsigned char)e->d_name[0])) continue;
        int pid = atoi(e->d_name);
        if (parent_of(pid) == parent) n = add_entry(out, n, pid, p);
    }
    closedir(dir);
    return n;
}

static int descends_from(int pid, int ancestor) {
    for (int depth = 0; depth < 64 && pid > 1; depth++)
        if ((pid = parent_of(pid)) == ancestor) return 1;
    return 0;
}

/* Every process but this one whose arguments after the program (argv[1:] joined by spaces) begin with `text`
 * ("-m gpumon.workloads": every built-in workload, never a gpumon that names one in its --cmd), and that
 * descends from p->under when set (a test's own, not those of other tests on the same machine). */
static int by_args(const char *text, struct entry *out, int n, const struct proc *p) {
    DIR *dir = opendir("/proc");
    if (!dir) return n;
    struct dirent *e;
    while ((e = readdir(dir))) {
        int pid = atoi(e->d_name);
        if (!isdigit((unsigned char)e->d_name[0]) || pid == getpid()) continue;
        if (p->under > 0 && !descends_from(pid, p->under)) continue;
        char path[64], args[4096];
        snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t len = fread(args, 1, sizeof args - 1, f);
        fclose(f);
        args[len] = '\0';
        size_t program = strlen(args) + 1;  /* argv[0] and its NUL */
        if (program >= len) continue;
        for (size_t i = program; i < len; i++)
            if (args[i] == '\0') args[i] = ' ';
        if (strncmp(args + program, text, strlen(text)) == 0) n = add_entry(out, n, pid, p);
    }
    closedir(dir);
    return n;
}

/* The device's processes now, with children_of= and args= expanded by reading /proc. */
static int entries(const struct device *d, struct entry *out) {
    int n = 0;
    for (int i = 0; i < d->nproc; i++) {
        const struct proc *p = &d->proc[i];
        if (p->args[0]) {
            n = by_args(p->args, out, n, p);
            continue;
        }
        if (p->children_of < 0) {
            n = add_entry(out, n, p->pid, p);
            continue;
        }
        int parent = p->children_of == 0 ? getpid() : p->children_of;
        int found = children_from_tasks(parent, out, n, p);
        n = found >= 0 ? found : children_from_scan(parent, out, n, p);
    }
    return n;
}

/* ---- H100 per-call CPU cost (FAKENVML_COSTS=h100) ----------------------- */

/* Median thread CPU µs per call on one H100 80GB HBM3, driver 580.159.04, two jobs training
 * (tests/fakenvml/h100/nvml-call-costs.txt; GPM calls from gpm.txt), measured through pynvml.
 * pynvml makes two C calls (size query, then fill) for the compute process list and the
 * process utilisation when there is something to return, so each C call here costs half of
 * the measured figure; the graphics list was empty there (one C call). Calls not measured
 * cost nothing extra. Field reads, GPM samples and GPM metric sets are priced in
 * field_values_cost(), gpm_sample_cost() and gpm_metrics_cost(). */
static const struct {
    const char *function;
    double us;
} COSTS[] = {
    {"nvmlDeviceGetUtilizationRates", 1.254},
    {"nvmlDeviceGetMemoryInfo", 5.79},
    {"nvmlDeviceGetMemoryInfo_v2", 5.79},
    {"nvmlDeviceGetPowerUsage", 1.255},
    {"nvmlDeviceGetTemperature", 1.42},
    {"nvmlDeviceGetTemperatureV", 1.42},
    {"nvmlDeviceGetClockInfo", 1.46},
    {"nvmlDeviceGetPcieThroughput", 815.269},
    {"nvmlDeviceGetComputeRunningProcesses", 61.526 / 2},
    {"nvmlDeviceGetComputeRunningProcesses_v2", 61.526 / 2},
    {"nvmlDeviceGetComputeRunningProcesses_v3", 61.526 / 2},
    {"nvmlDeviceGetGraphicsRunningProcesses", 17.193},
    {"nvmlDeviceGetGraphicsRunningProcesses_v2", 17.193},
    {"nvmlDeviceGetGraphicsRunningProcesses_v3", 17.193},
    {"nvmlDeviceGetProcessUtilization", 2310.971 / 2},
};
#define N_COSTS (sizeof(COSTS) / sizeof(COSTS[0]))

static long long thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Burn `us` microseconds of this thread's CPU time (a busy loop: the cost is CPU, not latency). */
static void burn(double us) {
    if (!costs_h100 || us <= 0) return;
    long long until = thread_cpu_ns() + llround(us * 1000.0);
    volatile unsigned long spin = 0;
    while (thread_cpu_ns() < until) spin++;
}

static void burn_call(const char *function) {
    for (size_t i = 0; i < N_COSTS; i++)
        if (strcmp(COSTS[i].function, function) == 0) burn(COSTS[i].us);
}

/* nvmlDeviceGetFieldValues: 155-162 µs for one PCIe field, 263 µs for the two together. */
static double field_values_cost(int count) { return count > 0 ? 54.0 + 104.5 * count : 0.0; }

/* nvmlGpmSampleGet: 53 µs idle, 400 µs with a job using the GPU or the link. */
static double gpm_sample_cost(const struct device *d, double t);

/* nvmlGpmMetricsGet: 4-6 µs for one metric, 7-10 µs for 20+21+2+3+10; 1,756 µs for a set with
 * graphics (1) or tensor (5) activity. */
static double gpm_metrics_cost(int n, int dear) { return dear ? 1756.0 : 4.25 + 0.85 * n; }

/* ---- call prologue ----------------------------------------------------- */

static struct device *lookup(nvmlDevice_t h) {
    for (int i = 0; i < ndev; i++)
        if (h == &devices[i]) return h;
    return NULL;
}

/* Common checks for a device call; sets *t to the scenario time. */
static int begin(const char *function, nvmlDevice_t h, double *t) {
    if (init_count == 0) return NVML_ERROR_UNINITIALIZED;
    *t = elapsed();
    struct device *d = lookup(h);
    if (!d) return NVML_ERROR_INVALID_ARGUMENT;
    if (d->lost_at >= 0 && *t >= d->lost_at) return NVML_ERROR_GPU_IS_LOST;
    burn_call(function);
    return fault_for(function, *t);
}

static int begin_system(const char *function) {
    if (init_count == 0) return NVML_ERROR_UNINITIALIZED;
    return fault_for(function, elapsed());
}

#define LOCKED(expr)                  \
    do {                              \
        pthread_mutex_lock(&mu);      \
        nvmlReturn_t r_ = (expr);     \
        pthread_mutex_unlock(&mu);    \
        return r_;                    \
    } while (0)

static int copy_string(char *dst, unsigned int length, const char *src) {
    if (!dst) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(src) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(dst, src, strlen(src) + 1);
    return NVML_SUCCESS;
}

/* ---- init / system ----------------------------------------------------- */

static nvmlReturn_t do_init(void) {
    if (load_scenario() < 0) return NVML_ERROR_UNKNOWN;
    int rc = fault_for("nvmlInit", 0);
    if (rc) return rc;
    if (init_count++ == 0 && init_us < 0) init_us = real_now_us();
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlInit(void) { LOCKED(do_init()); }
EXPORT nvmlReturn_t nvmlInit_v2(void) { LOCKED(do_init()); }
EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    LOCKED(do_init());
}

static nvmlReturn_t do_shutdown(void) {
    if (init_count == 0) return NVML_ERROR_UNINITIALIZED;
    init_count--;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlShutdown(void) { LOCKED(do_shutdown()); }

EXPORT const char *nvmlErrorString(nvmlReturn_t result) {
    for (size_t i = 0; i < N_ERRORS; i++)
        if (ERRORS[i].code == result) return ERRORS[i].text;
    return "Unknown Error";
}

static nvmlReturn_t system_string(const char *function, char *dst, unsigned int length, const char *src) {
    int rc = begin_system(function);
    return rc ? rc : copy_string(dst, length, src);
}
EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    LOCKED(system_string("nvmlSystemGetDriverVersion", version, length, driver_version));
}
EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length) {
    LOCKED(system_string("nvmlSystemGetNVMLVersion", version, length, nvml_version));
}

static nvmlReturn_t cuda_version(const char *function, int *out) {
    int rc = begin_system(function);
    if (rc) return rc;
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    *out = cuda_driver_version;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) { LOCKED(cuda_version("nvmlSystemGetCudaDriverVersion", v)); }
EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) {
    LOCKED(cuda_version("nvmlSystemGetCudaDriverVersion_v2", v));
}

/* ---- device discovery -------------------------------------------------- */

static nvmlReturn_t device_count(const char *function, unsigned int *count) {
    int rc = begin_system(function);
    if (rc) return rc;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    *count = (unsigned int)ndev;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *c) { LOCKED(device_count("nvmlDeviceGetCount", c)); }
EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *c) { LOCKED(device_count("nvmlDeviceGetCount_v2", c)); }

static nvmlReturn_t handle_by_index(const char *function, unsigned int index, nvmlDevice_t *out) {
    int rc = begin_system(function);
    if (rc) return rc;
    if (!out || index >= (unsigned int)ndev) return NVML_ERROR_INVALID_ARGUMENT;
    struct device *d = &devices[index];
    if (d->lost_at >= 0 && elapsed() >= d->lost_at) return NVML_ERROR_GPU_IS_LOST;
    *out = d;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int i, nvmlDevice_t *d) {
    LOCKED(handle_by_index("nvmlDeviceGetHandleByIndex", i, d));
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d) {
    LOCKED(handle_by_index("nvmlDeviceGetHandleByIndex_v2", i, d));
}

static nvmlReturn_t handle_by_uuid(const char *uuid, nvmlDevice_t *out) {
    int rc = begin_system("nvmlDeviceGetHandleByUUID");
    if (rc) return rc;
    if (!uuid || !out) return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < ndev; i++) {
        if (strcmp(devices[i].uuid, uuid) == 0) {
            *out = &devices[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *d) { LOCKED(handle_by_uuid(uuid, d)); }

static nvmlReturn_t device_index(nvmlDevice_t h, unsigned int *index) {
    double t;
    int rc = begin("nvmlDeviceGetIndex", h, &t);
    if (rc) return rc;
    *index = (unsigned int)(h - devices);
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t h, unsigned int *i) { LOCKED(device_index(h, i)); }

static nvmlReturn_t device_string(const char *function, nvmlDevice_t h, char *dst, unsigned int length, int uuid) {
    double t;
    int rc = begin(function, h, &t);
    return rc ? rc : copy_string(dst, length, uuid ? h->uuid : h->name);
}
EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t h, char *name, unsigned int length) {
    LOCKED(device_string("nvmlDeviceGetName", h, name, length, 0));
}
EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t h, char *uuid, unsigned int length) {
    LOCKED(device_string("nvmlDeviceGetUUID", h, uuid, length, 1));
}

/* ---- device metrics ---------------------------------------------------- */

typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;
#define NVML_MEMORY_V2 0x02000028u

/* v1 counts reserved memory as used; v2 reports it separately. */
static nvmlReturn_t memory_v1(nvmlDevice_t h, nvmlMemory_t *m) {
    double t;
    int rc = begin("nvmlDeviceGetMemoryInfo", h, &t);
    if (rc) return rc;
    if (!m) return NVML_ERROR_INVALID_ARGUMENT;
    double mib = 1048576.0;
    m->total = (unsigned long long)llround(h->mem_total_mib * mib);
    m->used = (unsigned long long)llround((metric(h, M_MEM_USED, t) + metric(h, M_MEM_RESERVED, t)) * mib);
    m->free = m->total - m->used;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t h, nvmlMemory_t *m) { LOCKED(memory_v1(h, m)); }

#ifndef NO_MEMINFO_V2
static nvmlReturn_t memory_v2(nvmlDevice_t h, nvmlMemory_v2_t *m) {
    double t;
    int rc = begin("nvmlDeviceGetMemoryInfo_v2", h, &t);
    if (rc) return rc;
    if (!m) return NVML_ERROR_INVALID_ARGUMENT;
    if (m->version != NVML_MEMORY_V2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    double mib = 1048576.0;
    m->total = (unsigned long long)llround(h->mem_total_mib * mib);
    m->reserved = (unsigned long long)llround(metric(h, M_MEM_RESERVED, t) * mib);
    m->used = (unsigned long long)llround(metric(h, M_MEM_USED, t) * mib);
    m->free = m->total - m->reserved - m->used;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t h, nvmlMemory_v2_t *m) { LOCKED(memory_v2(h, m)); }
#endif

typedef struct {
    unsigned int gpu, memory;
} nvmlUtilization_t;

static nvmlReturn_t utilization(nvmlDevice_t h, nvmlUtilization_t *u) {
    double t;
    int rc = begin("nvmlDeviceGetUtilizationRates", h, &t);
    if (rc) return rc;
    if (!u) return NVML_ERROR_INVALID_ARGUMENT;
    u->gpu = (unsigned int)llround(metric(h, M_GPU_UTIL, t));
    u->memory = (unsigned int)llround(metric(h, M_MEM_UTIL, t));
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t h, nvmlUtilization_t *u) { LOCKED(utilization(h, u)); }

/* One unsigned metric scaled by `scale`, for the simple getters. */
static nvmlReturn_t uint_metric(const char *function, nvmlDevice_t h, int m, double scale, unsigned int *out) {
    double t;
    int rc = begin(function, h, &t);
    if (rc) return rc;
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    *out = (unsigned int)llround(metric(h, m, t) * scale);
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t h, unsigned int *mw) {
    LOCKED(uint_metric("nvmlDeviceGetPowerUsage", h, M_POWER_W, 1000.0, mw));
}
EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t h, unsigned int *g) {
    LOCKED(uint_metric("nvmlDeviceGetCurrPcieLinkGeneration", h, M_PCIE_GEN, 1.0, g));
}
EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t h, unsigned int *w) {
    LOCKED(uint_metric("nvmlDeviceGetCurrPcieLinkWidth", h, M_PCIE_WIDTH, 1.0, w));
}

static nvmlReturn_t temperature(nvmlDevice_t h, int sensor, unsigned int *c) {
    if (sensor != 0) return NVML_ERROR_INVALID_ARGUMENT;
    return uint_metric("nvmlDeviceGetTemperature", h, M_TEMP_C, 1.0, c);
}
EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t h, int sensor, unsigned int *c) {
    LOCKED(temperature(h, sensor, c));
}

#ifndef NO_TEMPERATURE_V
typedef struct {
    unsigned int version;
    int sensorType;
    int temperature;
} nvmlTemperature_t;
#define NVML_TEMPERATURE_V1 0x100000Cu

static nvmlReturn_t temperature_v(nvmlDevice_t h, nvmlTemperature_t *out) {
    double t;
    int rc = begin("nvmlDeviceGetTemperatureV", h, &t);
    if (rc) return rc;
    if (!out || out->sensorType != 0) return NVML_ERROR_INVALID_ARGUMENT;
    if (out->version != NVML_TEMPERATURE_V1) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    out->temperature = (int)llround(metric(h, M_TEMP_C, t));
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t h, nvmlTemperature_t *out) { LOCKED(temperature_v(h, out)); }
#endif

static nvmlReturn_t clock_info(nvmlDevice_t h, int type, unsigned int *mhz) {
    if (type != 0 && type != 1) {  /* NVML_CLOCK_GRAPHICS, NVML_CLOCK_SM */
        double t;
        int rc = begin("nvmlDeviceGetClockInfo", h, &t);
        return rc ? rc : NVML_ERROR_NOT_SUPPORTED;
    }
    return uint_metric("nvmlDeviceGetClockInfo", h, M_SM_CLOCK, 1.0, mhz);
}
EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t h, int type, unsigned int *mhz) {
    LOCKED(clock_info(h, type, mhz));
}

/* Link bytes over the last 20 ms window, in KB/s (1 KB = 1024 bytes): the same bytes the
 * counters and GPM count (with protocol overhead, ~7 % above a copy's payload on the H100). */
static nvmlReturn_t pcie_throughput(nvmlDevice_t h, int counter, unsigned int *kbps) {
    if (counter != 0 && counter != 1) return NVML_ERROR_INVALID_ARGUMENT;
    double t;
    int rc = begin("nvmlDeviceGetPcieThroughput", h, &t);
    if (rc) return rc;
    if (!kbps) return NVML_ERROR_INVALID_ARGUMENT;
    int m = counter == 1 ? M_PCIE_RX : M_PCIE_TX;  /* NVML_PCIE_UTIL_RX_BYTES = 1 */
    double bps = t >= THROUGHPUT_WINDOW_S
        ? (integral(h, m, t) - integral(h, m, t - THROUGHPUT_WINDOW_S)) / THROUGHPUT_WINDOW_S
        : metric(h, m, t);
    *kbps = (unsigned int)(bps / 1024.0);
    return NVML_SUCCESS;
}

static unsigned int max_link(const struct device *d, double configured, int m) {
    return (unsigned int)llround(configured > 0 ? configured : d->seg[0].v[m]);
}
static nvmlReturn_t max_link_call(const char *function, nvmlDevice_t h, int width, unsigned int *out) {
    double t;
    int rc = begin(function, h, &t);
    if (rc) return rc;
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    *out = width ? max_link(h, h->pcie_max_width, M_PCIE_WIDTH) : max_link(h, h->pcie_max_gen, M_PCIE_GEN);
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t h, unsigned int *g) {
    LOCKED(max_link_call("nvmlDeviceGetMaxPcieLinkGeneration", h, 0, g));
}
EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t h, unsigned int *w) {
    LOCKED(max_link_call("nvmlDeviceGetMaxPcieLinkWidth", h, 1, w));
}

static nvmlReturn_t mig_mode(nvmlDevice_t h, unsigned int *current, unsigned int *pending) {
    double t;
    int rc = begin("nvmlDeviceGetMigMode", h, &t);
    if (rc) return rc;
    if (!current || !pending) return NVML_ERROR_INVALID_ARGUMENT;
    *current = *pending = (unsigned int)h->mig;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t h, unsigned int *current, unsigned int *pending) {
    LOCKED(mig_mode(h, current, pending));
}
EXPORT nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t h, int counter, unsigned int *kbps) {
    LOCKED(pcie_throughput(h, counter, kbps));
}

typedef union {
    double dVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    long long sllVal;
    int siVal;
    unsigned short usVal;
} nvmlValue_t;

typedef struct {
    unsigned int fieldId;
    unsigned int scopeId;
    long long timestamp;
    long long latencyUsec;
    int valueType;
    int nvmlReturn;
    nvmlValue_t value;
} nvmlFieldValue_t;

/* A PCIe byte counter as the H100's driver returns it: it advances only every counter step
 * (the timestamp is that step's), and a 32-bit counter comes back as valueType 1 and wraps. */
static void pcie_counter(const struct device *d, int m, double base, double t, nvmlFieldValue_t *v) {
    double step = d->counter_step_s > 0 ? d->counter_step_s : 1e-6;
    double at = floor(t / step + 1e-9) * step;
    unsigned long long bytes = (unsigned long long)floor(base + integral(d, m, at));
    v->timestamp = stamp(at);
    if (d->counter_bits == 32) {
        v->valueType = 1;  /* NVML_VALUE_TYPE_UNSIGNED_INT */
        v->value.ullVal = 0;
        v->value.uiVal = (unsigned int)(bytes & 0xFFFFFFFFULL);
    } else {
        v->valueType = 3;  /* NVML_VALUE_TYPE_UNSIGNED_LONG_LONG */
        v->value.ullVal = bytes;
    }
}

static nvmlReturn_t field_values(nvmlDevice_t h, int count, nvmlFieldValue_t *values) {
    double t;
    int rc = begin("nvmlDeviceGetFieldValues", h, &t);
    if (rc) return rc;
    if (count < 0 || (count > 0 && !values)) return NVML_ERROR_INVALID_ARGUMENT;
    burn(field_values_cost(count));
    long long ts = stamp(t);
    for (int i = 0; i < count; i++) {
        nvmlFieldValue_t *v = &values[i];
        char name[32];
        snprintf(name, sizeof name, "field:%u", v->fieldId);
        v->timestamp = ts;
        v->latencyUsec = 0;
        v->valueType = 3;
        v->nvmlReturn = fault_for(name, t);
        if (v->nvmlReturn) continue;
        if (v->fieldId == FI_PCIE_COUNT_RX_BYTES)
            pcie_counter(h, M_PCIE_RX, PCIE_RX_BASE, t, v);
        else if (v->fieldId == FI_PCIE_COUNT_TX_BYTES)
            pcie_counter(h, M_PCIE_TX, PCIE_TX_BASE, t, v);
        else
            v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    }
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t h, int count, nvmlFieldValue_t *values) {
    LOCKED(field_values(h, count, values));
}

/* ---- processes --------------------------------------------------------- */

typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlProcessInfo_v2_t;

/* The NVML size protocol: report the count, fill when the buffer is big enough. */
static nvmlReturn_t running(const char *function, nvmlDevice_t h, int kind, unsigned int *count, void *infos,
                            int version) {
    double t;
    int rc = begin(function, h, &t);
    if (rc) return rc;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    static struct entry all[MAX_ENTRIES];
    int n_all = entries(h, all), n = 0;
    for (int i = 0; i < n_all; i++)
        if (all[i].kinds & kind) all[n++] = all[i];
    if (n == 0) {
        *count = 0;
        return NVML_SUCCESS;
    }
    if (!infos || *count < (unsigned int)n) {
        *count = (unsigned int)n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (int i = 0; i < n; i++) {
        if (version == 1) {
            nvmlProcessInfo_v1_t *p = (nvmlProcessInfo_v1_t *)infos + i;
            p->pid = all[i].pid;
            p->usedGpuMemory = all[i].mem_bytes;
        } else {
            nvmlProcessInfo_v2_t *p = (nvmlProcessInfo_v2_t *)infos + i;
            p->pid = all[i].pid;
            p->usedGpuMemory = all[i].mem_bytes;
            p->gpuInstanceId = 0xFFFFFFFFu;
            p->computeInstanceId = 0xFFFFFFFFu;
        }
    }
    *count = (unsigned int)n;
    return NVML_SUCCESS;
}

#define RUNNING(name, kind, version, type)                                                         \
    EXPORT nvmlReturn_t name(nvmlDevice_t h, unsigned int *count, type *infos) {                   \
        LOCKED(running(#name, h, kind, count, infos, version));                                    \
    }

RUNNING(nvmlDeviceGetComputeRunningProcesses, 1, 1, nvmlProcessInfo_v1_t)
RUNNING(nvmlDeviceGetGraphicsRunningProcesses, 2, 1, nvmlProcessInfo_v1_t)
#ifndef NO_V2
RUNNING(nvmlDeviceGetComputeRunningProcesses_v2, 1, 2, nvmlProcessInfo_v2_t)
RUNNING(nvmlDeviceGetGraphicsRunningProcesses_v2, 2, 2, nvmlProcessInfo_v2_t)
#endif
#ifndef NO_V3
RUNNING(nvmlDeviceGetComputeRunningProcesses_v3, 1, 3, nvmlProcessInfo_v2_t)
RUNNING(nvmlDeviceGetGraphicsRunningProcesses_v3, 2, 3, nvmlProcessInfo_v2_t)
#endif

typedef struct {
    unsigned int pid;
    unsigned long long timeStamp;
    unsigned int smUtil, memUtil, encUtil, decUtil;
} nvmlProcessUtilizationSample_t;

/* Every buffered sample newer than lastSeen: one per process per sampling instant (instants at
 * multiples of util_period_ms, at most MAX_UTIL_INSTANTS back); sm_util lists cycle per instant. */
static nvmlReturn_t process_utilization(nvmlDevice_t h, nvmlProcessUtilizationSample_t *samples,
                                        unsigned int *count, unsigned long long last_seen) {
    double t;
    int rc = begin("nvmlDeviceGetProcessUtilization", h, &t);
    if (rc) return rc;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    last_util_timestamp_arg = last_seen;
    double period = h->util_period_s > 0 ? h->util_period_s : 0.1;
    long long last_k = (long long)floor(t / period + 1e-9);
    long long first_k = last_k - MAX_UTIL_INSTANTS + 1 > 0 ? last_k - MAX_UTIL_INSTANTS + 1 : 0;
    while (first_k <= last_k && (unsigned long long)stamp(first_k * period) <= last_seen) first_k++;
    static struct entry all[MAX_ENTRIES];
    int n_all = entries(h, all), n_procs = 0;
    for (int i = 0; i < n_all; i++)
        if (all[i].proc->sm_util[0] >= 0) all[n_procs++] = all[i];
    long long instants = last_k - first_k + 1;
    unsigned int n = instants > 0 ? (unsigned int)(instants * n_procs) : 0;
    if (n == 0) return NVML_ERROR_NOT_FOUND;
    if (!samples || *count < n) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    unsigned int i = 0;
    for (long long k = first_k; k <= last_k; k++) {
        for (int j = 0; j < n_procs; j++, i++) {
            const struct proc *p = all[j].proc;
            samples[i].pid = all[j].pid;
            samples[i].timeStamp = (unsigned long long)stamp(k * period);
            samples[i].smUtil = (unsigned int)llround(p->sm_util[k % p->n_sm_util]);
            samples[i].memUtil = (unsigned int)llround(p->mem_util);
            samples[i].encUtil = 0;
            samples[i].decUtil = 0;
        }
    }
    *count = n;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t h, nvmlProcessUtilizationSample_t *samples,
                                                    unsigned int *count, unsigned long long last_seen) {
    LOCKED(process_utilization(h, samples, count, last_seen));
}

/* ---- GPM (Hopper's GPU performance monitoring) ---------------------------- */

/* The struct layouts of nvml.h / pynvml 13.x (c_nvmlGpmSupport_t, c_nvmlGpmMetricsGet_t). */
typedef struct {
    unsigned int version;
    unsigned int isSupportedDevice;
} nvmlGpmSupport_t;

typedef struct {
    const char *shortName;
    const char *longName;
    const char *unit;
} nvmlGpmMetricInfo_t;

typedef struct {
    unsigned int metricId;
    nvmlReturn_t nvmlReturn;
    double value;
    nvmlGpmMetricInfo_t metricInfo;
} nvmlGpmMetric_t;

#define NVML_GPM_METRIC_MAX 477
typedef struct gpm_sample *nvmlGpmSample_t;

typedef struct {
    unsigned int version;
    unsigned int numMetrics;
    nvmlGpmSample_t sample1;
    nvmlGpmSample_t sample2;
    nvmlGpmMetric_t metrics[NVML_GPM_METRIC_MAX];
} nvmlGpmMetricsGet_t;

#define GPM_MAGIC 0x67706d31u
struct gpm_sample {
    unsigned int magic;
    const struct device *device;  /* NULL until nvmlGpmSampleGet */
    double t;
};

static double gpm_sample_cost(const struct device *d, double t) {
    int busy = metric(d, M_GPU_UTIL, t) > 0 || metric(d, M_PCIE_RX, t) + metric(d, M_PCIE_TX, t) > 1e8;
    return busy ? 400.0 : 53.0;
}

static nvmlReturn_t gpm_support(nvmlDevice_t h, nvmlGpmSupport_t *out) {
    double t;
    int rc = begin("nvmlGpmQueryDeviceSupport", h, &t);
    if (rc) return rc;
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    if (out->version != 1) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    out->isSupportedDevice = h->gpm ? 1 : 0;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t h, nvmlGpmSupport_t *out) { LOCKED(gpm_support(h, out)); }

static nvmlReturn_t gpm_alloc(nvmlGpmSample_t *out) {
    int rc = begin_system("nvmlGpmSampleAlloc");
    if (rc) return rc;
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    struct gpm_sample *s = calloc(1, sizeof *s);
    if (!s) return NVML_ERROR_UNKNOWN;
    s->magic = GPM_MAGIC;
    *out = s;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t *out) { LOCKED(gpm_alloc(out)); }

static nvmlReturn_t gpm_free(nvmlGpmSample_t s) {
    if (!s || s->magic != GPM_MAGIC) return NVML_ERROR_INVALID_ARGUMENT;
    s->magic = 0;
    free(s);
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t s) { LOCKED(gpm_free(s)); }

static nvmlReturn_t gpm_sample_get(nvmlDevice_t h, nvmlGpmSample_t s) {
    double t;
    int rc = begin("nvmlGpmSampleGet", h, &t);
    if (rc) return rc;
    if (!s || s->magic != GPM_MAGIC) return NVML_ERROR_INVALID_ARGUMENT;
    if (!h->gpm || h->mig) return NVML_ERROR_NOT_SUPPORTED;
    burn(gpm_sample_cost(h, t));
    s->device = h;
    s->t = t;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t h, nvmlGpmSample_t s) { LOCKED(gpm_sample_get(h, s)); }

/* The mean of metric m between two sample times (its value at t1 when the samples coincide). */
static double gpm_mean(const struct device *d, int m, double t1, double t2) {
    return t2 > t1 ? (integral(d, m, t2) - integral(d, m, t1)) / (t2 - t1) : metric(d, m, t1);
}

static nvmlReturn_t gpm_metric(const struct device *d, unsigned int id, double t1, double t2, double *value,
                               const char **name, const char **unit) {
    int m;
    double scale = 1.0;
    switch (id) {
    case 1: m = M_GPU_UTIL; *name = "gr_util"; break;
    case 2: m = M_SM_ACTIVE; *name = "sm_util"; break;
    case 3: m = M_SM_OCCUPANCY; *name = "sm_occupancy"; break;
    case 5: m = M_TENSOR; *name = "any_tensor_util"; break;
    case 10: m = M_DRAM_BW; *name = "dram_bw_util"; break;
    case 20: m = M_PCIE_TX; *name = "pcie_tx_per_sec"; scale = 1.0 / 1048576.0; break;
    case 21: m = M_PCIE_RX; *name = "pcie_rx_per_sec"; scale = 1.0 / 1048576.0; break;
    default: return NVML_ERROR_NOT_SUPPORTED;
    }
    *unit = scale == 1.0 ? "%" : "MiB/sec";
    *value = gpm_mean(d, m, t1, t2) * scale;
    return NVML_SUCCESS;
}

static nvmlReturn_t gpm_metrics_get(nvmlGpmMetricsGet_t *g) {
    int rc = begin_system("nvmlGpmMetricsGet");
    if (rc) return rc;
    if (!g) return NVML_ERROR_INVALID_ARGUMENT;
    if (g->version != 1) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (g->numMetrics > NVML_GPM_METRIC_MAX || !g->sample1 || !g->sample2 || g->sample1->magic != GPM_MAGIC ||
        g->sample2->magic != GPM_MAGIC || !g->sample1->device || g->sample1->device != g->sample2->device ||
        g->sample2->t < g->sample1->t)
        return NVML_ERROR_INVALID_ARGUMENT;
    int dear = 0;
    for (unsigned int i = 0; i < g->numMetrics; i++)
        dear |= g->metrics[i].metricId == 1 || g->metrics[i].metricId == 5;
    burn(gpm_metrics_cost((int)g->numMetrics, dear));
    const struct device *d = g->sample1->device;
    double t = elapsed();
    for (unsigned int i = 0; i < g->numMetrics; i++) {
        nvmlGpmMetric_t *m = &g->metrics[i];
        char fault[32];
        snprintf(fault, sizeof fault, "gpm:%u", m->metricId);
        m->value = 0;
        m->metricInfo.shortName = m->metricInfo.longName = m->metricInfo.unit = NULL;
        m->nvmlReturn = fault_for(fault, t);
        if (m->nvmlReturn) continue;
        const char *name = NULL, *unit = NULL;
        m->nvmlReturn = gpm_metric(d, m->metricId, g->sample1->t, g->sample2->t, &m->value, &name, &unit);
        m->metricInfo.shortName = m->metricInfo.longName = name;
        m->metricInfo.unit = unit;
    }
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *g) { LOCKED(gpm_metrics_get(g)); }

/* ---- test introspection (not NVML) ------------------------------------- */

/* The lastSeenTimeStamp passed to the latest nvmlDeviceGetProcessUtilization. */
EXPORT unsigned long long fakenvml_last_utilization_timestamp(void) { return last_util_timestamp_arg; }

/* The CPU timestamp (µs) the fake took as its time zero at nvmlInit. */
EXPORT long long fakenvml_init_timestamp(void) { return init_us; }
