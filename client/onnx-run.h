/* ONNX backend tests on the client side of npud, for the conformance runner (npu-onnx-test):
 * finding test directories (model.onnx + test_data_set_N/{input,output}_K.pb) and running
 * one test through the graph API — load, bind every data set's inputs and expected outputs
 * to device buffers, run, compare — into an outcome that says pass, fail or unsupported, with
 * the failure's class and reason. The runner decides where and in which process this runs. */
#ifndef NPU_ONNX_RUN_H
#define NPU_ONNX_RUN_H

#include <jansson.h>
#include <stddef.h>

#define ONNX_REASON_MAX 1024

struct onnx_test {
        char *name; /* the directory's base name, e.g. "test_abs" */
        char *dir;
};

struct onnx_test_list {
        struct onnx_test *v;
        size_t n, cap;
};

/* Append the tests under each root (a root may itself be a test), sorted by name, each
 * directory once. 0, or -1 with a message (a root that is not a directory, no tests at all,
 * out of memory). */
int onnx_tests_find(struct onnx_test_list *l, char *const *roots, int nroots, char *err,
                    size_t errlen);
void onnx_tests_free(struct onnx_test_list *l);

/* The outcome of one test. status "pass", "fail" or "unsupported"; class NULL for a pass,
 * else "unsupported-op", "unsupported-dtype", "mismatch" or "error". */
struct onnx_outcome {
        const char *status;
        const char *class;
        char reason[ONNX_REASON_MAX];
        char what[256];        /* the text after "unsupported: " */
        json_t *ops;           /* operator types of the model, in first-use order */
        json_t *unsupported;   /* operators npud named unsupported */
        int lost;              /* the connection to npud broke: npud may have died */
};

/* 0, or -1 when out of memory. */
int onnx_outcome_init(struct onnx_outcome *o);
void onnx_outcome_deinit(struct onnx_outcome *o);

/* Run test t on device 0 of the npud at socket (NULL: $NPU_SOCKET or the default socket),
 * on a connection of its own, the model loaded with accumulation accumulate (enum
 * npu_accumulate). Never fails as such: every problem is the outcome. */
void onnx_run_test(const struct onnx_test *t, const char *socket, int accumulate, struct onnx_outcome *o);

/* {"status","class","reason","what","ops","unsupported_ops","lost"} (new reference). */
json_t *onnx_outcome_json(const struct onnx_outcome *o);

#endif
