/* Client-visible error codes. They travel as {"code","name","message"} and are the values
 * of npu_status_t in npu.h; numbers are never reused or renumbered. */
#ifndef NPU_PROTO_ERRORS_H
#define NPU_PROTO_ERRORS_H

enum proto_error {
        PROTO_OK = 0,
        PROTO_E_INVALID = 1,      /* an argument is wrong (type, range, missing) */
        PROTO_E_BAD_HANDLE = 2,   /* unknown, foreign, freed or destroyed handle */
        PROTO_E_NO_MEMORY = 3,    /* device memory exhausted */
        PROTO_E_QUOTA = 4,        /* tenant quota exceeded */
        PROTO_E_LIMIT = 5,        /* per-session or per-daemon limit exceeded */
        PROTO_E_PERMISSION = 6,   /* caller may not do this */
        PROTO_E_UNSUPPORTED = 7,  /* unknown operator or dtype */
        PROTO_E_SHAPE = 8,        /* operator shape or dtype mismatch */
        PROTO_E_OUT_OF_RANGE = 9, /* offset/length outside the object */
        PROTO_E_PROTOCOL = 10,    /* unknown method, malformed message */
        PROTO_E_VERSION = 11,     /* no common protocol version */
        PROTO_E_DEVICE = 12,      /* device failed */
        PROTO_E_EXEC = 13,        /* a kernel failed while running */
        PROTO_E_BUSY = 14,        /* retry later (backpressure) */
        PROTO_E_NOT_READY = 15,   /* work not complete yet (query) */
        PROTO_E_CANCELLED = 16,   /* work cancelled */
        PROTO_E_CONNECTION = 17,  /* client side: connection to npud lost */
        PROTO_E_SYSTEM = 18,      /* client side: a system call failed */
        PROTO_E_COUNT
};

/* "invalid", "bad-handle", ...; "unknown" for out-of-range codes. */
const char *proto_error_name(int code);

#endif
