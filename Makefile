# hookd build. GNU make is the entry point; everything lands under build/.
#   make            release build: build/hookd, build/libhookd.a
#   make asan       ASan+UBSan build: build-asan/
#   make test       every suite (unit, store, scenario, interop) under ASan+UBSan
#   make run        install what is missing, build, start hookd on SQLite
#   make bench      load generator and figures (not part of make test)
#   make fuzz       every libFuzzer target for FUZZ_TIME seconds (60) each: build-fuzz/

CC       ?= cc
PKGS     := libcurl sqlite3 jansson inih openssl libpq
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null)

WARN     := -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes \
            -Wformat=2 -Wpointer-arith -Wno-unused-parameter
ifeq ($(WERROR),1)
WARN     += -Werror
endif
BASE_CFLAGS := -std=c17 -D_GNU_SOURCE -g -pthread -Iinclude -Isrc $(WARN) $(PKG_CFLAGS)
LIBS     := $(PKG_LIBS) -lpthread -lm

VARIANT  ?= release
ifeq ($(VARIANT),asan)
OUT      := build-asan
# HOOKD_TEST_HOOKS: the daemon honours HOOKD_TEST_STORE_FAULT (the tests' build only; a release ignores it).
OPT      := -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined -DHOOKD_TEST_HOOKS
LDOPT    := -fsanitize=address,undefined
else
OUT      := build
OPT      := -O2
LDOPT    :=
endif
CFLAGS   := $(BASE_CFLAGS) $(OPT) $(EXTRA_CFLAGS)

SRCS     := $(shell find src -name '*.c' | sort)
LIB_SRCS := $(filter-out src/main.c,$(SRCS))
OBJS     := $(SRCS:%.c=$(OUT)/obj/%.o)
LIB_OBJS := $(LIB_SRCS:%.c=$(OUT)/obj/%.o)
PUB_SRCS := $(wildcard src/core/*.c) $(wildcard src/lib/*.c) src/publish.c src/publish_pg.c
PUB_OBJS := $(PUB_SRCS:%.c=$(OUT)/obj/%.o)

UNIT_SRCS  := $(wildcard tests/unit/test_*.c)
STORE_SRCS := $(wildcard tests/store/test_*.c)
TOOL_SRCS  := $(wildcard tests/tools/*.c)
TEST_BINS  := $(UNIT_SRCS:tests/%.c=$(OUT)/tests/%) $(STORE_SRCS:tests/%.c=$(OUT)/tests/%) \
              $(TOOL_SRCS:tests/%.c=$(OUT)/tests/%)
# bench/*.c are one program, the load generator: loadgen.c (scenarios, main) and its modules.
BENCH_SRCS := $(wildcard bench/*.c)
BENCH_BINS := $(OUT)/bench/loadgen

# Fuzz targets (libFuzzer, clang from Debian) with ASan+UBSan, in build-fuzz/: every
# src/core file compiled with clang into an archive, so each target links only what it uses.
FUZZ_CC    ?= clang
FUZZ_OUT   := build-fuzz
FUZZ_TIME  ?= 60
FUZZ_SRCS  := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS  := $(FUZZ_SRCS:tests/fuzz/%.c=$(FUZZ_OUT)/%)
FUZZ_CORE_OBJS := $(patsubst %.c,$(FUZZ_OUT)/obj/%.o,$(wildcard src/core/*.c))
FUZZ_CFLAGS := $(BASE_CFLAGS) -O1 -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined \
               -fno-sanitize-recover=undefined

.PHONY: all build asan test run bench deps clean tests-build bench-build fuzz fuzz-build
all build: $(OUT)/hookd $(OUT)/libhookd.a

$(OUT)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

# The dashboard and portal files are embedded by the assembler (.incbin): rebuild when one changes.
$(OUT)/obj/src/ui/ui.o: $(shell find src/ui/static -type f 2>/dev/null)

$(OUT)/hookd: $(OBJS)
	$(CC) $(LDOPT) -o $@ $^ $(LIBS)

$(OUT)/libhookd.a: $(PUB_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(OUT)/libhookd_internal.a: $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

# Test tools are applications: they link only the public library.
$(OUT)/tests/tools/%: tests/tools/%.c $(OUT)/libhookd.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDOPT) -o $@ $< $(OUT)/libhookd.a $(LIBS)

$(OUT)/tests/%: tests/%.c $(OUT)/libhookd_internal.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDOPT) -Itests -o $@ $< $(OUT)/libhookd_internal.a $(LIBS) -lcmocka

$(OUT)/bench/loadgen: $(BENCH_SRCS) $(wildcard bench/*.h) $(OUT)/libhookd_internal.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDOPT) -o $@ $(BENCH_SRCS) $(OUT)/libhookd_internal.a $(LIBS)

$(FUZZ_OUT)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP -c $< -o $@

$(FUZZ_OUT)/libcore.a: $(FUZZ_CORE_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(FUZZ_OUT)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_common.h $(FUZZ_OUT)/libcore.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -Itests/fuzz -o $@ $< $(FUZZ_OUT)/libcore.a $(LIBS)

# The HTTP parser is pure and lives in src/net: its target compiles it in.
$(FUZZ_OUT)/fuzz_http_parse: tests/fuzz/fuzz_http_parse.c src/net/http_parse.c src/net/http_parse.h tests/fuzz/fuzz_common.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -Itests/fuzz -o $@ $< src/net/http_parse.c

# So are the HTTP engine's response parser and URL reader.
$(FUZZ_OUT)/fuzz_http_response: tests/fuzz/fuzz_http_response.c src/net/http_response.c src/net/http_response.h \
		src/net/http_url.c src/net/http_url.h tests/fuzz/fuzz_common.h
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -Itests/fuzz -o $@ $< src/net/http_response.c src/net/http_url.c

fuzz-build: $(FUZZ_BINS)

fuzz: fuzz-build
	@bash scripts/fuzz.sh $(FUZZ_TIME)

tests-build: $(OUT)/hookd $(OUT)/libhookd.a $(TEST_BINS)
bench-build: $(OUT)/hookd $(BENCH_BINS)

asan:
	$(MAKE) VARIANT=asan build

test:
	@bash scripts/test.sh

run:
	@bash scripts/run.sh

bench:
	@bash bench/run.sh

deps:
	@bash scripts/deps.sh

clean:
	rm -rf build build-asan build-fuzz

-include $(shell find $(OUT)/obj -name '*.d' 2>/dev/null)
-include $(shell find $(FUZZ_OUT)/obj -name '*.d' 2>/dev/null)
