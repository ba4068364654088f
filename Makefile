# npud — plain Makefile. Outputs only under build/ (build/asan/ for the sanitizer build).
#   make            build daemon, library, CLI, tools
#   make deps       install missing Debian packages (as root; else prints the command)
#   make run        deps + build + npud in the foreground on simulated devices
#   make check      deps + build + every test       make check-asan   same under ASan+UBSan
#   make bench      benchmarks (print figures)      make fuzz         bounded libFuzzer runs (protocol, ONNX import)
#   make conformance  ONNX backend node tests through npud -> build/conformance.json
#   make install    PREFIX=/usr/local DESTDIR=      make clean

VERSION    := 0.1.0
PREFIX     ?= /usr/local
# Libraries go in the multiarch directory (/usr/lib/x86_64-linux-gnu), as Debian's do; the
# pkg-config file lives there too.
MULTIARCH  ?= $(shell dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || $(CC) -print-multiarch 2>/dev/null)
LIBDIR     ?= $(PREFIX)/lib$(if $(MULTIARCH),/$(MULTIARCH))
DESTDIR    ?=
BUILD      ?= build
CC         ?= gcc
WERROR     ?= -Werror

DEB_PKGS   := build-essential pkg-config libevent-dev libjansson-dev libsystemd-dev check \
              libopenblas-dev libprotobuf-c-dev protobuf-c-compiler python3 systemd groff-base \
              libonnx-dev libonnx-testdata dbus python3-dev python3-numpy \
              libsleef-dev libdnnl-dev libxsmm-dev

PKGS       := libevent jansson openblas libsystemd libprotobuf-c sleef
PKG_CFLAGS  = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
# oneDNN (ops/blas.c) ships no pkg-config file; its Debian build threads with OpenMP, whose
# per-thread team size ops/blas.c sets, hence libgomp.
# libxsmm (ops/blas.c, the xsmm-packed GEMM variant) ships static libraries only; the
# noblas one, since OpenBLAS is linked anyway.
PKG_LIBS    = $(shell pkg-config --libs $(PKGS) 2>/dev/null) -ldnnl -lgomp -lxsmm -lxsmmnoblas -ldl
CHECK_CFLAGS = $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   = $(shell pkg-config --libs check 2>/dev/null)

WARN       := -Wall -Wextra -Wshadow -Wpointer-arith -Wstrict-prototypes -Wmissing-prototypes \
              -Wno-unused-parameter $(WERROR)
BASE_CFLAGS := -std=gnu11 -D_GNU_SOURCE -DNPUD_VERSION='"$(VERSION)"' -pthread -fPIC $(WARN)
OPT        ?= -O2 -g
# The kernels (ops/, graph/) are built at -O3 on top: at -O2 gcc vectorizes only loops that
# need no remainder handling, which leaves a softmax or layer norm over rows of 128 or 256
# scalar. -O3's deeper inlining makes gcc's maybe-uninitialized analysis report paths that
# cannot happen (a struct filled by a callee on success only); that warning stays on for the
# rest of the build and for the kernels in the sanitizer build (OPT=-O1 ..., KOPT=).
KOPT       ?= -O3 -Wno-maybe-uninitialized
SAN        ?=
CFLAGS_ALL  = $(BASE_CFLAGS) $(OPT) $(SAN) $(PKG_CFLAGS) -I. -Iclient/include -I$(BUILD)/gen
LDFLAGS_ALL = $(SAN) -pthread

PROTO_SRC  := $(wildcard proto/*.c)
POLICY_SRC := $(wildcard policy/*.c)
UTIL_SRC   := $(wildcard util/*.c)
# util without the journal writer (log.c links libsystemd): what the operator library may use
UTIL_PURE_SRC := $(filter-out util/log.c,$(UTIL_SRC))
OPS_SRC    := $(wildcard ops/*.c)
GRAPH_SRC  := $(wildcard graph/*.c)
DAEMON_SRC := $(wildcard daemon/backend/*.c daemon/exec/*.c daemon/api/*.c) $(OPS_SRC) $(GRAPH_SRC) $(UTIL_SRC)
CLIENT_SRC := client/libnpu.c client/libnpu-visible.c client/libnpu-graph.c client/libnpu-admin.c client/libnpu-lifecycle.c \
              client/libnpu-completion.c client/libnpu-hostrun.c
CTL_SRC    := $(wildcard client/npuctl*.c)

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))

PROTO_OBJ  := $(call obj,$(PROTO_SRC))
POLICY_OBJ := $(call obj,$(POLICY_SRC))
DAEMON_OBJ := $(call obj,$(DAEMON_SRC))

# ONNX model files: C code generated from the system's schema (Debian libonnx-dev) at build
# time, never committed. Everything that includes onnx.pb-c.h waits for it (order-only).
ONNX_PROTO := /usr/include/onnx/onnx.proto
ONNX_GEN_H := $(BUILD)/gen/onnx.pb-c.h
ONNX_GEN_C := $(BUILD)/gen/onnx.pb-c.c
ONNX_OBJ   := $(BUILD)/obj/gen/onnx.pb-c.o
ONNX_DATA  ?= /usr/share/libonnx-testdata/data
ONNX_TENSOR_OBJ := $(call obj,client/onnx-tensor.c proto/dtype.c) $(ONNX_OBJ)
CLIENT_OBJ := $(call obj,$(CLIENT_SRC))

NPUD       := $(BUILD)/bin/npud
NPUCTL     := $(BUILD)/bin/npuctl
NPUBENCH   := $(BUILD)/bin/npubench
NPUSIM     := $(BUILD)/bin/npusim
ONNX_TEST  := $(BUILD)/bin/npu-onnx-test
LIBNPU     := $(BUILD)/lib/libnpu.so.1
LIBNPU_A   := $(BUILD)/lib/libnpu-static.a
CORE_A     := $(BUILD)/lib/libnpud-core.a
EXAMPLES   := $(patsubst client/examples/%.c,$(BUILD)/bin/example-%,$(wildcard client/examples/*.c))
UNIT_TESTS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(wildcard tests/unit/test_*.c))
INTEG_TESTS:= $(patsubst tests/integration/%.c,$(BUILD)/tests/integ-%,$(wildcard tests/integration/test_*.c))
# The Python module npu (python/, docs/python.md): built against Debian's python3 and NumPy,
# libnpu linked in statically (its symbols kept private) so the installed module needs no
# libnpu.so. PYTHON is Debian's interpreter, not whatever python3 is first on PATH.
PYTHON     ?= /usr/bin/python3
PY_EXT     := $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))' 2>/dev/null)
PY_INC     := $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null)
PY_NP_INC  := $(shell $(PYTHON) -c 'import numpy; print(numpy.get_include())' 2>/dev/null)
PY_VER     := $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
PY_MOD     := $(BUILD)/python/npu$(PY_EXT)
# Where Debian's python3 looks: /usr/lib/python3/dist-packages for PREFIX=/usr, else
# PREFIX/lib/python3.X/dist-packages (/usr/local/lib/python3.11/dist-packages).
PYTHON_SITE ?= $(if $(filter /usr,$(PREFIX)),$(PREFIX)/lib/python3/dist-packages,$(PREFIX)/lib/python$(PY_VER)/dist-packages)
BENCHES    := $(patsubst tests/bench/%.c,$(BUILD)/bench/%,$(wildcard tests/bench/bench_*.c))

.SECONDARY:
.PHONY: all deps run check check-asan unit integration bench fuzz install clean examples conformance
all: $(NPUD) $(LIBNPU) $(BUILD)/lib/libnpu.so $(NPUCTL) $(BUILD)/lib/libnpu.pc $(EXAMPLES) $(NPUSIM) \
  $(ONNX_TEST) $(PY_MOD)

deps:
	@missing=""; for p in $(DEB_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -z "$$missing" ]; then echo "deps: all packages present"; \
	elif [ "$$(id -u)" = 0 ]; then echo "deps: installing$$missing"; \
	  (apt-get install -y --no-install-recommends $$missing || \
	   (apt-get update && apt-get install -y --no-install-recommends $$missing)) >/dev/null; \
	else echo "deps: missing$$missing; run: sudo apt-get install -y$$missing"; exit 1; fi

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -MMD -MP -c $< -o $@

$(BUILD)/obj/ops/%.o $(BUILD)/obj/graph/%.o: OPT += $(KOPT)

$(ONNX_GEN_H) $(ONNX_GEN_C) &: $(ONNX_PROTO)
	@mkdir -p $(dir $@)
	protoc-c --c_out=$(BUILD)/gen -I$(dir $(ONNX_PROTO)) $(ONNX_PROTO)

# Generated code: not held to the project's warning set.
$(ONNX_OBJ): $(ONNX_GEN_C) $(ONNX_GEN_H)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 $(OPT) $(SAN) -fPIC -c $< -o $@

$(call obj,$(GRAPH_SRC)) $(BUILD)/obj/tests/unit/test_graph.o $(BUILD)/obj/tests/unit/test_onnx_opset.o \
  $(BUILD)/obj/tests/integration/test_graph.o $(BUILD)/obj/tests/integration/test_graph_api.o $(BUILD)/obj/tests/bench/bench_conv.o \
  $(BUILD)/obj/tests/integration/test_host_run.o $(BUILD)/obj/tests/integration/test_onnx_breadth.o \
  $(BUILD)/obj/tests/integration/test_tune.o $(BUILD)/obj/tests/unit/test_packed.o \
  $(BUILD)/obj/tests/unit/test_conv_direct.o \
  $(BUILD)/obj/tests/integration/test_graph_load_async.o $(BUILD)/obj/tests/integration/test_accumulate.o \
  $(BUILD)/obj/tests/unit/test_ops_string.o $(BUILD)/obj/tests/integration/test_strings.o \
  $(BUILD)/obj/tests/bench/bench_npud.o $(BUILD)/obj/tests/bench/bench_compile.o \
  $(BUILD)/obj/tests/bench/bench_models.o: | $(ONNX_GEN_H)

$(CORE_A): $(DAEMON_OBJ) $(PROTO_OBJ) $(POLICY_OBJ) $(ONNX_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(NPUD): $(call obj,daemon/main.c) $(CORE_A)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(PKG_LIBS) -lm

# libnpu: proto objects compiled in; only the API is exported (version script).
$(LIBNPU): $(CLIENT_OBJ) $(PROTO_OBJ) client/libnpu.map
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_ALL) -shared -Wl,-soname,libnpu.so.1 -Wl,--version-script=client/libnpu.map \
	  -o $@ $(CLIENT_OBJ) $(PROTO_OBJ) $(shell pkg-config --libs jansson)

$(BUILD)/lib/libnpu.so: $(LIBNPU)
	ln -sf libnpu.so.1 $@

$(LIBNPU_A): $(CLIENT_OBJ) $(PROTO_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/lib/libnpu.pc: client/libnpu.pc.in Makefile
	@mkdir -p $(dir $@)
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@VERSION@|$(VERSION)|g' $< > $@

$(NPUCTL): $(call obj,$(CTL_SRC)) $(LIBNPU)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_ALL) -o $@ $(call obj,$(CTL_SRC)) -L$(BUILD)/lib -l:libnpu.so.1 \
	  -Wl,-rpath,'$$ORIGIN/../lib' $(shell pkg-config --libs jansson)

# npusim: the dispatch policy in virtual time; the policy objects and jansson, nothing else.
$(NPUSIM): $(call obj,policy/npusim/npusim.c util/err.c) $(POLICY_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(shell pkg-config --libs jansson) -lm

$(BUILD)/bin/example-%: $(BUILD)/obj/client/examples/%.o $(LIBNPU)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_ALL) -o $@ $< -L$(BUILD)/lib -l:libnpu.so.1 -Wl,-rpath,'$$ORIGIN/../lib' -lm

# Unit tests link the daemon core; integration tests link libnpu and start the real npud.
$(BUILD)/tests/test_%: $(BUILD)/obj/tests/unit/test_%.o $(CORE_A)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(CHECK_LIBS) $(PKG_LIBS) -lm

$(BUILD)/obj/tests/%.o: CFLAGS_ALL += $(CHECK_CFLAGS)

$(BUILD)/tests/integ-%: $(BUILD)/obj/tests/integration/%.o $(BUILD)/obj/tests/integration/harness.o $(LIBNPU_A) $(CORE_A)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(CHECK_LIBS) $(PKG_LIBS) -lm

$(BUILD)/bench/bench_%: $(BUILD)/obj/tests/bench/bench_%.o $(BUILD)/obj/tests/integration/harness.o $(LIBNPU_A) $(CORE_A)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(PKG_LIBS) -lm

# Helper clients of the shell tests (tests/integration/npuctl-*.c): they link libnpu only.
$(BUILD)/tests/npuctl-%: $(BUILD)/obj/tests/integration/npuctl-%.o $(LIBNPU)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_ALL) -o $@ $< -L$(BUILD)/lib -l:libnpu.so.1 -Wl,-rpath,'$$ORIGIN/../lib'

# Soak (issue 9): SOAK_CLIENTS client processes for SOAK_SECONDS against a fresh npud, with
# random SIGKILLs and injected faults; prints npud's RSS and fd curve. CI runs a short one.
SOAK_CLIENTS ?= 64
SOAK_SECONDS ?= 1800
.PHONY: soak
$(BUILD)/tests/soak: $(BUILD)/obj/tests/soak/soak.o $(BUILD)/obj/tests/integration/harness.o $(LIBNPU_A)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(PKG_LIBS) -lm

soak: all $(BUILD)/tests/soak
	NPUD_BIN=$(NPUD) $(BUILD)/tests/soak --clients $(SOAK_CLIENTS) --seconds $(SOAK_SECONDS) --npuctl $(NPUCTL)

$(NPUBENCH): $(BUILD)/bench/bench_npud
	@mkdir -p $(dir $@)
	cp $< $@

# npu-onnx-test, the ONNX conformance runner: libnpu linked statically; the TensorProto
# decoder (client/onnx-tensor.c) and the generated code are shared with its unit test.
$(call obj,client/onnx-tensor.c client/onnx-run.c client/npu-onnx-test.c) \
  $(BUILD)/obj/tests/unit/test_onnx_tensor.o: | $(ONNX_GEN_H)

$(ONNX_TEST): $(call obj,client/npu-onnx-test.c client/onnx-run.c) $(ONNX_TENSOR_OBJ) $(LIBNPU_A)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(shell pkg-config --libs jansson libprotobuf-c) -lm

$(BUILD)/tests/test_onnx_tensor: $(BUILD)/obj/tests/unit/test_onnx_tensor.o $(ONNX_TENSOR_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_ALL) -o $@ $^ $(CHECK_LIBS) $(shell pkg-config --libs libprotobuf-c) -lm

examples: $(EXAMPLES)

# Python's and NumPy's headers as system headers: the project's warnings are for its own code.
$(BUILD)/obj/python/npumodule.o: python/npumodule.c
	@mkdir -p $(dir $@)
	@[ -n "$(PY_NP_INC)" ] || { echo "python: NumPy for $(PYTHON) is missing; run: make deps"; exit 1; }
	$(CC) $(CFLAGS_ALL) -isystem $(PY_INC) -isystem $(PY_NP_INC) -MMD -MP -c $< -o $@

$(PY_MOD): $(BUILD)/obj/python/npumodule.o $(LIBNPU_A)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS_ALL) -shared -Wl,--exclude-libs,ALL -o $@ $^ $(shell pkg-config --libs jansson)

.PHONY: python-check python-bench
# The module's unittest suite against a private npud. Under ASan (SAN set) the module is
# instrumented, so Debian's (uninstrumented) python3 must preload the sanitizer runtimes;
# leak checking is off there because the interpreter keeps its objects at exit by design.
PY_PRELOAD = $(if $(SAN),LD_PRELOAD="$$($(CC) -print-file-name=libasan.so) $$($(CC) -print-file-name=libubsan.so)" \
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1,)
python-check: $(PY_MOD) $(NPUD) $(NPUCTL)
	cd python/tests && NPUD_BIN=$(abspath $(NPUD)) NPUCTL_BIN=$(abspath $(NPUCTL)) \
	  PYTHONPATH=$(abspath $(BUILD)/python) $(PY_PRELOAD) $(PYTHON) -m unittest

# The Python request loop against the same loop in C, alternating in one process (p50 ratio).
python-bench: $(PY_MOD) $(NPUD)
	NPUD_BIN=$(abspath $(NPUD)) PYTHONPATH=$(abspath $(BUILD)/python) $(PYTHON) python/bench/bench_loop.py

run: deps all
	$(NPUD) --sim-devices 2 --log-level info

# The layers of the tree (docs/architecture.md): no #include may run back up a layer.
.PHONY: check-layers
check-layers:
	tools/check-layers.py .

# The exported symbols of libnpu.so.1 against tests/abi/libnpu.symbols: one that disappears
# or changes version fails, and so does one exported without being listed.
.PHONY: check-abi
check-abi: $(LIBNPU)
	tests/abi/check-abi.sh $(BUILD)

# The benches are built (not run) with the unit tests, so that a change that breaks one
# fails make check rather than the next make bench.
unit: all $(UNIT_TESTS) $(BENCHES) $(NPUBENCH) check-layers check-abi
	@set -e; for t in $(UNIT_TESTS); do echo "== $$t"; $$t; done

integration: all $(INTEG_TESTS) $(BUILD)/tests/npuctl-hold $(BUILD)/tests/npuctl-crowd
	@set -e; tests/abi/check-abi.sh $(BUILD)
	@set -e; for t in $(INTEG_TESTS); do echo "== $$t"; NPUD_BIN=$(NPUD) $$t; done
	@set -e; tests/integration/run-examples.sh $(BUILD)
	@set -e; tests/integration/test-cli.sh $(BUILD)
	@set -e; tests/integration/test-npuctl.sh $(BUILD)
	@set -e; tests/integration/test-npuctl-escape.sh $(BUILD)
	@set -e; tests/integration/test-cluster.sh $(BUILD)
	@set -e; $(MAKE) --no-print-directory soak SOAK_CLIENTS=16 SOAK_SECONDS=60
	@set -e; tests/integration/test-systemd.sh $(BUILD)
	@set -e; tests/integration/test-metrics.sh $(BUILD)
	@set -e; tests/integration/test-dbus.sh $(BUILD)
	@set -e; tests/integration/test-npusim.sh $(BUILD)
	@set -e; tests/onnx/check-expected.sh $(BUILD)
	@set -e; ONNX_ACCUMULATE=float64 tests/onnx/check-expected.sh $(BUILD)
	@set -e; ONNX_ACCUMULATE=mixed tests/onnx/check-expected.sh $(BUILD)
	@set -e; $(MAKE) --no-print-directory python-check

check: deps
	$(MAKE) all
	$(MAKE) unit integration

# Check's per-test timeouts guard against hangs; sanitized code on a loaded 2-core host runs
# several times slower (a compile-pass test once took over the 4 s default), so they are
# stretched 4x here.
check-asan: deps
	$(MAKE) BUILD=build/asan OPT="-O1 -g -fno-omit-frame-pointer" KOPT= \
	  SAN="-fsanitize=address,undefined -fno-sanitize-recover=all" all
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 CK_TIMEOUT_MULTIPLIER=4 \
	  $(MAKE) BUILD=build/asan OPT="-O1 -g -fno-omit-frame-pointer" KOPT= \
	  SAN="-fsanitize=address,undefined -fno-sanitize-recover=all" unit integration

bench: deps all $(BENCHES) $(NPUBENCH)
	@set -e; for b in $(BENCHES); do echo "== $$b"; NPUD_BIN=$(NPUD) $$b; done
	$(BUILD)/bin/npusim --generate mixed --seed 1 --duration-ms 2000
	$(MAKE) --no-print-directory python-bench

# Every ONNX backend node test through a private npud's graph API: one result per test in
# $(BUILD)/conformance.json (tests/onnx/update-expected.sh makes the CI list from it).
conformance: deps
	$(MAKE) all
	$(ONNX_TEST) --start-npud --quiet --summary --json $(BUILD)/conformance.json $(ONNX_DATA)/node

FUZZ_TIME ?= 60
FUZZ_SMOKE_TIME ?= 20
# libFuzzer targets under ASan + UBSan; any UBSan report is fatal (a finding, not a warning).
FUZZ_CFLAGS := -std=gnu11 -D_GNU_SOURCE -I. -g -O1 -fsanitize=fuzzer,address,undefined \
               -fno-sanitize-recover=undefined
FUZZ_ONNX_SEEDS := relu add matmul_2d gemm_default_no_bias if loop11 scan9_sum \
  reshape_reordered_all_dims conv_with_strides_padding softmax_axis_1 cast_FLOAT_to_FLOAT16 \
  sequence_insert_at_back sequence_map_add_2_sequences_expanded loop16_seq_none if_opt scan_sum \
  cast_STRING_to_FLOAT cast_FLOAT_to_STRING strnormalizer_export_monday_insensintive_upper_twodim
# Per-input limits of the bounded runs (fuzz_graph also caps time and memory inside: 200 ms
# of run time per input). libFuzzer's timeout is wall-clock, so it is generous: a loaded CI
# host must not turn a starved process into a finding, and a real hang still trips it.
FUZZ_LIMITS := -timeout=30 -rss_limit_mb=2048

.PHONY: fuzz-build fuzz-smoke
fuzz-build: deps
	@command -v clang >/dev/null || { [ "$$(id -u)" = 0 ] && apt-get install -y clang >/dev/null; } || \
	  { echo "fuzz: clang is missing; run: sudo apt-get install -y clang"; exit 1; }
	@mkdir -p $(BUILD)/fuzz
	clang $(FUZZ_CFLAGS) \
	  $(shell pkg-config --cflags jansson) tests/fuzz/fuzz_proto.c $(PROTO_SRC) \
	  $(shell pkg-config --libs jansson) -o $(BUILD)/fuzz/fuzz_proto
	$(MAKE) $(ONNX_GEN_H)
	clang $(FUZZ_CFLAGS) -I$(BUILD)/gen \
	  $(shell pkg-config --cflags openblas) tests/fuzz/fuzz_onnx.c $(GRAPH_SRC) $(OPS_SRC) $(UTIL_PURE_SRC) \
	  $(ONNX_GEN_C) proto/dtype.c policy/cost.c \
	  $(shell pkg-config --libs openblas libprotobuf-c sleef) -ldnnl -lgomp -lxsmm -lxsmmnoblas -ldl -lm -o $(BUILD)/fuzz/fuzz_onnx
	clang $(FUZZ_CFLAGS) -I$(BUILD)/gen \
	  $(shell pkg-config --cflags openblas) tests/fuzz/fuzz_graph.c $(GRAPH_SRC) $(OPS_SRC) $(UTIL_PURE_SRC) \
	  $(ONNX_GEN_C) proto/dtype.c policy/cost.c \
	  $(shell pkg-config --libs openblas libprotobuf-c sleef) -ldnnl -lgomp -lxsmm -lxsmmnoblas -ldl -lm -o $(BUILD)/fuzz/fuzz_graph
	@mkdir -p $(BUILD)/fuzz/corpus $(BUILD)/fuzz/corpus-onnx $(BUILD)/fuzz/corpus-graph
	@for t in $(FUZZ_ONNX_SEEDS); do \
	  f=$(ONNX_DATA)/node/test_$$t/model.onnx; [ ! -f $$f ] || cp $$f $(BUILD)/fuzz/corpus-onnx/$$t.onnx; done

# New inputs go to the first corpus directory (under $(BUILD)); the committed seeds are read.
fuzz: fuzz-build
	$(BUILD)/fuzz/fuzz_proto -max_total_time=$(FUZZ_TIME) -max_len=4096 $(BUILD)/fuzz/corpus tests/fuzz/corpus-proto
	$(BUILD)/fuzz/fuzz_onnx -max_total_time=$(FUZZ_TIME) -max_len=16384 $(BUILD)/fuzz/corpus-onnx \
	  tests/fuzz/corpus-onnx
	$(BUILD)/fuzz/fuzz_graph -max_total_time=$(FUZZ_TIME) -max_len=16384 $(FUZZ_LIMITS) \
	  $(BUILD)/fuzz/corpus-graph tests/fuzz/corpus-graph

# CI: every target for FUZZ_SMOKE_TIME seconds; a crash, leak, UBSan report, timeout or
# out-of-memory input makes libFuzzer (and so make) exit non-zero.
fuzz-smoke: fuzz-build
	$(BUILD)/fuzz/fuzz_proto -max_total_time=$(FUZZ_SMOKE_TIME) -max_len=4096 $(FUZZ_LIMITS) \
	  $(BUILD)/fuzz/corpus tests/fuzz/corpus-proto
	$(BUILD)/fuzz/fuzz_onnx -max_total_time=$(FUZZ_SMOKE_TIME) -max_len=16384 $(FUZZ_LIMITS) \
	  $(BUILD)/fuzz/corpus-onnx tests/fuzz/corpus-onnx
	$(BUILD)/fuzz/fuzz_graph -max_total_time=$(FUZZ_SMOKE_TIME) -max_len=16384 $(FUZZ_LIMITS) \
	  $(BUILD)/fuzz/corpus-graph tests/fuzz/corpus-graph

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/sbin $(DESTDIR)$(LIBDIR) \
	  $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(LIBDIR)/pkgconfig
	install -m 0755 $(NPUD) $(DESTDIR)$(PREFIX)/sbin/npud
	install -m 0755 $(NPUCTL) $(DESTDIR)$(PREFIX)/bin/npuctl
	install -m 0755 $(NPUSIM) $(DESTDIR)$(PREFIX)/bin/npusim
	install -m 0755 $(LIBNPU) $(DESTDIR)$(LIBDIR)/libnpu.so.1
	ln -sf libnpu.so.1 $(DESTDIR)$(LIBDIR)/libnpu.so
	install -m 0644 client/include/npu.h $(DESTDIR)$(PREFIX)/include/npu.h
	install -m 0644 client/include/npu-admin.h $(DESTDIR)$(PREFIX)/include/npu-admin.h
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@VERSION@|$(VERSION)|g' \
	  client/libnpu.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/libnpu.pc
	install -d $(DESTDIR)$(PREFIX)/lib/systemd/system $(DESTDIR)$(PREFIX)/lib/sysusers.d \
	  $(DESTDIR)$(PREFIX)/lib/tmpfiles.d $(DESTDIR)$(PREFIX)/lib/udev/rules.d
	sed -e 's|/usr/sbin/npud|$(PREFIX)/sbin/npud|' -e 's|/usr/bin/npuctl|$(PREFIX)/bin/npuctl|' \
	  systemd/npud.service > $(DESTDIR)$(PREFIX)/lib/systemd/system/npud.service
	install -m 0644 systemd/npud.socket $(DESTDIR)$(PREFIX)/lib/systemd/system/npud.socket
	install -m 0644 systemd/npud.sysusers $(DESTDIR)$(PREFIX)/lib/sysusers.d/npud.conf
	install -m 0644 systemd/npud.tmpfiles $(DESTDIR)$(PREFIX)/lib/tmpfiles.d/npud.conf
	install -m 0644 systemd/60-npud.rules $(DESTDIR)$(PREFIX)/lib/udev/rules.d/60-npud.rules
	install -d $(DESTDIR)$(PREFIX)/share/dbus-1/system.d $(DESTDIR)$(PREFIX)/share/dbus-1/interfaces
	install -m 0644 systemd/org.npud.Manager1.conf $(DESTDIR)$(PREFIX)/share/dbus-1/system.d/
	install -m 0644 $(wildcard docs/dbus/org.npud.*.xml) $(DESTDIR)$(PREFIX)/share/dbus-1/interfaces/
	install -d $(DESTDIR)$(PREFIX)/share/doc/npud/examples
	install -m 0644 docs/npud.conf.example $(DESTDIR)$(PREFIX)/share/doc/npud/examples/npud.conf
	install -m 0644 docs/dbus.md $(DESTDIR)$(PREFIX)/share/doc/npud/dbus.md
	install -d $(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/share/man/man3 \
	  $(DESTDIR)$(PREFIX)/share/man/man5 $(DESTDIR)$(PREFIX)/share/man/man8
	install -m 0644 client/completion/npuctl.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/npuctl
	install -m 0644 docs/man/libnpu.3 $(DESTDIR)$(PREFIX)/share/man/man3/libnpu.3
	install -m 0644 docs/man/npud.conf.5 $(DESTDIR)$(PREFIX)/share/man/man5/npud.conf.5
	install -m 0644 docs/man/npud.8 docs/man/npuctl.8 $(DESTDIR)$(PREFIX)/share/man/man8/
	install -d $(DESTDIR)$(PREFIX)/share/npud/slurm
	install -m 0755 contrib/slurm/npud-prolog contrib/slurm/npud-epilog $(DESTDIR)$(PREFIX)/share/npud/slurm/
	install -d $(DESTDIR)$(PYTHON_SITE)
	install -m 0644 $(PY_MOD) $(DESTDIR)$(PYTHON_SITE)/

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
